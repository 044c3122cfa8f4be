"""The node bundle shipped to every host: what a node process needs, nothing controller-side.

The node code (:func:`testbed.registry.node_code_files`: ``testbed/__init__.py``,
``testbed/nodes/**/*.py`` and every registered protocol's ``nodes`` part, external ones too), the host helper (``tbhost.py`` and the
other stdlib-only modules of :mod:`testbed.providers.hostside`, at the top) and a
pure-Python copy of msgpack under ``vendor/`` (used on a host only where msgpack is not
installed). The tarball is deterministic (sorted, mtime 0) and named by the digest of its
contents, so hosts keep one copy per code version and ``deploy`` skips hosts that have it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from pathlib import Path

import testbed

PACKAGE = Path(testbed.__file__).resolve().parent
HOSTSIDE = PACKAGE / "providers" / "hostside"
TBHOST = HOSTSIDE / "tbhost.py"


def hostside_files() -> list[Path]:
    """The host helper: ``tbhost.py`` and the modules it imports by plain name, shipped side by side."""
    return sorted(p for p in HOSTSIDE.glob("*.py") if p.name != "__init__.py")


def bundle_files() -> list[tuple[str, Path]]:
    """(name in the bundle, local path), sorted by name."""
    from testbed.registry import node_code_files

    files = [(p.name, p) for p in hostside_files()]
    files += [(rel, f) for f, rel in node_code_files() if f.suffix == ".py"]
    try:
        import msgpack

        mp = Path(msgpack.__file__).resolve().parent
        for p in sorted(mp.glob("*.py")):
            files.append((f"vendor/msgpack/{p.name}", p))
    except ImportError:  # the controller has msgpack (a dependency); be lenient for odd setups
        pass
    return sorted(files)


def build_bundle(cache_dir: Path) -> tuple[Path, str]:
    """Write ``<cache_dir>/nodes-<digest>.tar.gz`` (if missing); return (path, digest)."""
    files = bundle_files()
    h = hashlib.sha256()
    for name, path in files:
        data = path.read_bytes()
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    digest = h.hexdigest()[:16]
    cache_dir.mkdir(parents=True, exist_ok=True)
    out = cache_dir / f"nodes-{digest}.tar.gz"
    if out.exists():
        return out, digest
    buf = io.BytesIO()
    # the gzip header's own mtime is 0 too (tarfile's "w:gz" stamps the current second, so two
    # builds a second apart differed): the same files give the same bytes
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=6, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as tf:
        for name, path in files:
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data))
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, out)
    return out, digest


def tar_files(dest: Path, files: dict[str, bytes]) -> Path:
    """A small tar of in-memory files (e.g. one host's node configs)."""
    with tarfile.open(dest, "w") as tf:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data))
    return dest
