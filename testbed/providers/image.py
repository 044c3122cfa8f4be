"""The node image (shared by the docker and ansible providers): build context, build, offline base.

The image holds only what nodes need: python3, msgpack, iproute2 (tc) and the node
code (the runtime ``testbed/nodes/**`` and every registered protocol's ``nodes`` part, external
ones included: :func:`testbed.registry.node_code_files`). Its Dockerfile is
``images/node/Dockerfile``; the build context is assembled in a temporary directory
so nothing else of the checkout reaches the engine.

Bases:
  * ``python:3.11-slim`` (default; needs a registry),
  * ``testbed-base:bookworm``, made locally with ``debootstrap --variant=minbase bookworm``
    and ``docker import`` (``offline_base=True``; needs root, debootstrap and a Debian
    mirror -- the one apt uses, or ``TESTBED_DEBIAN_MIRROR``).

Every image carries the label ``testbed.context=<sha256 of the build context>`` so a
stale image (node code changed since the build) is detected and rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

import testbed
from testbed.errors import ProviderError

Progress = Callable[[str], None]

DEFAULT_TAG = f"testbed-node:{testbed.__version__}"
REGISTRY_BASE = "python:3.11-slim"
OFFLINE_BASE = "testbed-base:bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
MIRROR_ENV = "TESTBED_DEBIAN_MIRROR"
CONTEXT_LABEL = "testbed.context"
#: The image's fixed unprivileged user (``images/node/Dockerfile``): nodes never run as root.
#: The ansible host side (``hostside/host.py``, stdlib only) keeps the same number.
NODE_UID = 10001
NODE_GID = 10001
NODE_USER = f"{NODE_UID}:{NODE_GID}"

_PKG_ROOT = Path(testbed.__file__).resolve().parent  # .../testbed
_REPO_ROOT = _PKG_ROOT.parent


def _noop(_: str) -> None:
    pass


def dockerfile_path() -> Path:
    p = _REPO_ROOT / "images" / "node" / "Dockerfile"
    if not p.is_file():
        raise ProviderError(f"{p}: node Dockerfile not found (build the image from a testbed source checkout)")
    return p


def context_files() -> list[tuple[Path, str]]:
    """(source, path inside the context) for every file of the build context, sorted."""
    from testbed.registry import node_code_files

    return [(dockerfile_path(), "Dockerfile")] + [(f, "code/" + rel) for f, rel in node_code_files()]


def context_digest(files: list[tuple[Path, str]] | None = None) -> str:
    h = hashlib.sha256()
    for src, rel in files or context_files():
        h.update(rel.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()


def assemble_context(dest: Path) -> str:
    """Copy the build context into ``dest``; return its digest."""
    files = context_files()
    for src, rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
    return context_digest(files)


# -- offline base --------------------------------------------------------------------
def apt_mirror(sources: list[Path] | None = None) -> str:
    """The Debian mirror apt uses on this machine (for debootstrap), or deb.debian.org."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV]
    if sources is None:
        d = Path("/etc/apt")
        sources = [d / "sources.list", *sorted((d / "sources.list.d").glob("*.list")),
                   *sorted((d / "sources.list.d").glob("*.sources"))]
    for f in sources:
        try:
            text = f.read_text()
        except OSError:
            continue
        for url in re.findall(r"(?:^URIs:\s*|^deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.M):
            if url.rstrip("/").endswith("/debian") and "security" not in url:
                return url.rstrip("/")
    return DEFAULT_MIRROR


def make_offline_base(client: Any, *, tag: str = OFFLINE_BASE, mirror: str | None = None,
                      progress: Progress = _noop) -> str:
    """debootstrap a bookworm minbase and import it as ``tag``. Returns the tag."""
    if shutil.which("debootstrap") is None:
        raise ProviderError("the offline base needs debootstrap (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise ProviderError("the offline base needs root (debootstrap); run as root or pass --base IMAGE")
    mirror = mirror or apt_mirror()
    with tempfile.TemporaryDirectory(prefix="testbed-base-") as tmp:
        root = Path(tmp) / "root"
        progress(f"debootstrap --variant=minbase bookworm from {mirror} (about a minute)")
        r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(root), mirror],
                           capture_output=True, text=True)
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ProviderError(f"debootstrap failed (mirror {mirror}): {tail[0]}; "
                                f"set {MIRROR_ENV} to a reachable Debian mirror")
        progress(f"importing {root} as {tag}")
        tar = Path(tmp) / "root.tar"
        r = subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], capture_output=True, text=True)
        if r.returncode != 0:
            raise ProviderError(f"tar of the offline base failed: {r.stderr.strip()}")
        repo, _, version = tag.partition(":")
        with open(tar, "rb") as f:
            client.api.import_image(src=f, repository=repo, tag=version or "latest",
                                    changes=["LABEL testbed.image=base"])
    return tag


# -- node image --------------------------------------------------------------------
def _image_exists(client: Any, ref: str) -> bool:
    import docker.errors

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def _ensure_registry_base(client: Any, base: str, progress: Progress) -> str | None:
    """None if ``base`` is available (locally or pulled); else the pull error text."""
    import docker.errors

    if _image_exists(client, base):
        return None
    progress(f"pulling {base}")
    try:
        client.images.pull(base)
        return None
    except docker.errors.DockerException as e:
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def build_image(*, base: str | None = None, offline_base: bool = False, tag: str = DEFAULT_TAG,
                progress: Progress = _noop, client: Any = None) -> str:
    """Build the node image; returns ``tag``.

    ``offline_base``: use (and make if missing) ``testbed-base:bookworm``.
    ``base``: any image with apt (python3 is installed if missing).
    Neither: ``python:3.11-slim``, falling back to an existing local offline base.
    """
    import docker.errors

    from testbed.providers.engine import connect

    client = client or connect()
    if offline_base:
        if base:
            raise ProviderError("choose either --offline-base or --base IMAGE, not both")
        if not _image_exists(client, OFFLINE_BASE):
            make_offline_base(client, progress=progress)
        base = OFFLINE_BASE
    elif base:
        err = _ensure_registry_base(client, base, progress)
        if err:
            raise ProviderError(f"base image {base} is not available ({err}); "
                                "pull it, or run `testbed image build --offline-base`")
    else:
        err = _ensure_registry_base(client, REGISTRY_BASE, progress)
        if err is None:
            base = REGISTRY_BASE
        elif _image_exists(client, OFFLINE_BASE):
            progress(f"{REGISTRY_BASE} unavailable ({err}); using the local offline base {OFFLINE_BASE}")
            base = OFFLINE_BASE
        else:
            raise ProviderError(
                f"cannot get {REGISTRY_BASE} ({err}) and there is no offline base {OFFLINE_BASE}: "
                "run `testbed image build --offline-base` (root + debootstrap + a Debian mirror) "
                "or `testbed image build --base IMAGE` with an image you have")
    with tempfile.TemporaryDirectory(prefix="testbed-image-") as tmp:
        digest = assemble_context(Path(tmp))
        progress(f"building {tag} on {base}")
        try:
            client.images.build(
                path=tmp, tag=tag, buildargs={"BASE": base}, rm=True, forcerm=True, pull=False,
                labels={"testbed.image": "node", CONTEXT_LABEL: digest,
                        "testbed.base": base},
            )
        except docker.errors.BuildError as e:
            lines = [str(x.get("stream") or x.get("error") or "").strip() for x in (e.build_log or [])]
            lines = [x for x in lines if x]
            last = lines[-1] if lines else str(e)
            raise ProviderError(f"building {tag} on {base} failed: {last}") from None
        except docker.errors.APIError as e:
            raise ProviderError(f"building {tag} on {base} failed: {e.explanation or e}") from None
    return tag


def image_status(client: Any, tag: str = DEFAULT_TAG) -> str:
    """"missing", "stale" (node code changed since the build) or "current"."""
    import docker.errors

    try:
        img = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return "missing"
    labels = (img.attrs.get("Config") or {}).get("Labels") or {}
    return "current" if labels.get(CONTEXT_LABEL) == context_digest() else "stale"


def ensure_image(client: Any, tag: str = DEFAULT_TAG, progress: Progress = _noop, *,
                 offline_base: bool = False) -> str:
    """Build ``tag`` if it is missing or stale (a rebuild on the same base reuses the layer cache)."""
    st = image_status(client, tag)
    if st == "current":
        return tag
    base = None
    if st == "stale":
        img = client.images.get(tag)
        base = ((img.attrs.get("Config") or {}).get("Labels") or {}).get("testbed.base")
        if base and not _image_exists(client, base):
            base = None
    progress(f"node image {tag} is {st}; building it")
    if base == OFFLINE_BASE or (base is None and offline_base):
        return build_image(offline_base=True, tag=tag, progress=progress, client=client)
    return build_image(base=base, tag=tag, progress=progress, client=client)


def image_size(client: Any, tag: str = DEFAULT_TAG) -> int:
    return int(client.images.get(tag).attrs.get("Size", 0))


def _main(argv: list[str] | None = None) -> int:
    """``python -m testbed.providers.image [--offline-base] [--base IMAGE] [--if-needed]``."""
    import argparse
    import sys

    from testbed.errors import TestbedError
    from testbed.providers.engine import connect

    ap = argparse.ArgumentParser(prog="python -m testbed.providers.image")
    ap.add_argument("--offline-base", action="store_true")
    ap.add_argument("--base")
    ap.add_argument("--tag", default=DEFAULT_TAG)
    ap.add_argument("--if-needed", action="store_true", help="build only when missing or stale")
    a = ap.parse_args(argv)

    def say(m: str) -> None:
        print(m, flush=True)

    try:
        client = connect()
        if a.if_needed and not a.base:
            ensure_image(client, a.tag, say, offline_base=a.offline_base)
        else:
            build_image(base=a.base, offline_base=a.offline_base, tag=a.tag, progress=say, client=client)
        say(f"{a.tag}: {image_size(client, a.tag) / 1e6:.1f} MB")
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
