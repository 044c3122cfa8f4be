"""The node image for hosts that run nodes as containers: its name, and what ``deploy`` ships.

Every host that runs containers gets the same image, named by the digest of the node image's
build context (``testbed-node:ctx-<12 hex>``, see :mod:`testbed.providers.image`), so a
host that has it already is skipped and a code change ships a new one. Two ways to get it there:

* ``save`` -- build once on the controller's own Docker engine (the same
  ``testbed image build`` image the docker provider uses), ``docker save`` it to a tar in the
  cache (one per digest), copy the tar to each host that lacks the image, ``docker load``;
* ``build`` -- copy the build context (a few dozen KB) to each host that lacks the image and
  ``docker build`` it there on ``$TESTBED_NODE_BASE`` (default ``python:3.11-slim``, which
  the host pulls from its registry).

``$TESTBED_ANSIBLE_IMAGE=save|build`` chooses; by default ``save`` when the controller has a
Docker engine, else ``build``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from testbed.errors import ProviderError

IMAGE_MODE_ENV = "TESTBED_ANSIBLE_IMAGE"
BASE_ENV = "TESTBED_NODE_BASE"
REPO = "testbed-node"

Progress = Callable[[str], None]


def image_ref() -> tuple[str, str]:
    """(``testbed-node:ctx-<d12>``, full context digest). Raises ProviderError without a checkout."""
    from testbed.providers.image import context_digest

    digest = context_digest()
    return f"{REPO}:ctx-{digest[:12]}", digest


def local_engine() -> tuple[object | None, str]:
    """(client, "") for this machine's Docker engine, or (None, why not)."""
    try:
        import docker  # noqa: F401
    except ImportError:
        return None, "the docker Python package is not installed (pip install testbed[docker])"
    from testbed.providers.engine import connect

    try:
        return connect(), ""
    except Exception as e:  # ProviderError or a DockerException: no engine here
        return None, str(e).splitlines()[0] if str(e) else type(e).__name__


def choose_mode(override: str | None) -> tuple[str, str]:
    """(``save`` | ``build``, reason)."""
    if override:
        if override not in ("save", "build"):
            raise ProviderError(f"{IMAGE_MODE_ENV}={override!r}: choose save or build")
        return override, f"{IMAGE_MODE_ENV}={override}"
    client, why = local_engine()
    if client is not None:
        return "save", "the controller has a Docker engine: build once, docker save, copy, docker load"
    return "build", f"the controller has no Docker engine ({why}): docker build on each host"


def saved_image(cache: Path, ref: str, progress: Progress) -> Path:
    """``<cache>/image-<tag>.tar``: the node image built on this machine's engine, saved as ``ref``."""
    from testbed.providers.image import DEFAULT_TAG, ensure_image

    out = cache / f"image-{ref.split(':', 1)[1]}.tar"
    if out.exists():
        return out
    client, why = local_engine()
    if client is None:
        raise ProviderError(f"{IMAGE_MODE_ENV}=save needs a Docker engine on the controller: {why}")
    ensure_image(client, DEFAULT_TAG, progress)
    img = client.images.get(DEFAULT_TAG)
    repo, tag = ref.split(":", 1)
    img.tag(repo, tag)
    progress(f"docker save {ref} ({int(img.attrs.get('Size', 0)) / 1e6:.0f} MB)")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        for chunk in client.images.get(ref).save(named=ref):
            f.write(chunk)
    os.replace(tmp, out)
    return out


def build_context(cache: Path, ref: str) -> Path:
    """``<cache>/context-<tag>.tar``: the node image's build context (Dockerfile + node package)."""
    from testbed.providers.ansible.bundle import tar_files
    from testbed.providers.image import context_files

    out = cache / f"context-{ref.split(':', 1)[1]}.tar"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    tar_files(tmp, {rel: Path(src).read_bytes() for src, rel in context_files()})
    os.replace(tmp, out)
    return out


def build_base() -> str:
    from testbed.providers.image import REGISTRY_BASE

    return os.environ.get(BASE_ENV) or REGISTRY_BASE


def choose_runtimes(wanted: dict[str, str], facts: dict[str, dict]) -> tuple[dict[str, str], dict[str, str]]:
    """Per host ``docker`` or ``process`` from the topology's ``runtime`` and the host's facts.

    Returns (runtime per host, reason per host). Raises ProviderError naming every host whose
    topology says ``runtime: docker`` but whose engine does not answer its SSH user.
    """
    out, why, bad = {}, {}, []
    for h, want in wanted.items():
        d = (facts.get(h) or {}).get("docker") or {}
        usable = bool(d.get("cmd"))
        how = " with sudo" if usable and d["cmd"][0] == "sudo" else ""
        if want == "process":
            out[h], why[h] = "process", "runtime: process"
        elif usable:
            out[h] = "docker"
            why[h] = f"runtime: {want}; Docker engine {d.get('version')}{how}"
        elif want == "docker":
            bad.append(f"host {h}: runtime: docker, but its Docker engine does not answer the SSH user "
                       f"({d.get('error') or 'no docker command'})")
        else:
            out[h], why[h] = "process", f"runtime: auto; no usable Docker engine ({d.get('error') or 'none'})"
    if bad:
        raise ProviderError("; ".join(bad) + " (add the user to the docker group, or set become: true)")
    return out, why
