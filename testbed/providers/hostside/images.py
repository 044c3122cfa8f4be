"""The node image on a host: ``docker load`` of an image the controller saved, or ``docker build``
from a build context; the host side of :mod:`testbed.providers.ansible.images`. Stdlib only."""

from __future__ import annotations

import os

from engine import docker_of
from host import Host


def image_load(host: Host, tar_path: str, ref: str) -> dict:
    """``docker load`` a node image the controller saved; the tar is deleted either way."""
    d = docker_of(host.root)
    try:
        if d is None:
            raise RuntimeError("no usable Docker engine on this host (prepare found none)")
        with open(tar_path, "rb") as f:
            d.run("load", stdin=f, timeout=900)
    finally:
        if os.path.exists(tar_path):
            os.unlink(tar_path)
    if not d.has_image(ref):
        raise RuntimeError(f"docker load did not give {ref}")
    return {"image": ref, "loaded": True}


def image_build(host: Host, tar_path: str, ref: str, base: str) -> dict:
    """``docker build`` the node image on this host from a build context tar (pulls ``base``)."""
    d = docker_of(host.root)
    try:
        if d is None:
            raise RuntimeError("no usable Docker engine on this host (prepare found none)")
        if d.has_image(ref):
            return {"image": ref, "built": False}
        with open(tar_path, "rb") as f:  # the ref's tag names the context digest (ctx-<12 hex>)
            d.run("build", "--network", "host", "-t", ref, "--build-arg", f"BASE={base}",
                  "--label", "testbed.image=node", "--label", f"testbed.base={base}", "-", stdin=f, timeout=1800)
    finally:
        if os.path.exists(tar_path):
            os.unlink(tar_path)
    return {"image": ref, "built": True}
