"""Node containers never run as root: the image's fixed user, the providers' choice of user."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from testbed.providers.ansible.provider import CONTAINER_RUN_DIR
from testbed.providers.docker.provider import container_user
from testbed.providers.image import NODE_GID, NODE_UID, NODE_USER, dockerfile_path

HOSTSIDE = Path(__file__).resolve().parents[3] / "testbed" / "providers" / "hostside"


def test_the_image_runs_as_its_fixed_unprivileged_user():
    text = dockerfile_path().read_text()
    assert NODE_UID != 0 and NODE_GID != 0
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users == [NODE_USER]  # the last USER before the entry point: the node's
    assert f"testbed:x:{NODE_UID}:{NODE_GID}:" in text
    assert text.index("USER ") > text.index("COPY code/")


def test_the_host_side_keeps_the_same_user_and_container_paths():
    sys.path.insert(0, str(HOSTSIDE))
    try:
        import host
    finally:
        sys.path.remove(str(HOSTSIDE))
    assert (host.NODE_UID, host.NODE_GID) == (NODE_UID, NODE_GID)
    assert host.IN_RUN == CONTAINER_RUN_DIR


def test_docker_containers_never_run_as_root():
    assert container_user(False, 1000, 1000) == "1000:1000"  # the controller's own: its files stay its
    assert container_user(False, 0, 0) == NODE_USER  # a root controller: the image's user
    assert container_user(True, 1000, 1000) == NODE_USER  # a remote engine: no bind mounts to own
    assert container_user(True, 0, 0) == NODE_USER
