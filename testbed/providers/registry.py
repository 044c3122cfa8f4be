"""The provider factory: a provider instance by name, importing only that backend."""

from __future__ import annotations

from testbed.errors import UsageError
from testbed.providers.base import Provider


def get_provider(name: str) -> Provider:
    """The provider instance for a name (imports only that backend)."""
    if name == "local":
        from testbed.providers.local.provider import LocalProvider

        return LocalProvider()
    if name == "docker":
        from testbed.providers.docker.provider import DockerProvider

        return DockerProvider()
    if name == "ansible":
        from testbed.providers.ansible.provider import AnsibleProvider

        return AnsibleProvider()
    raise UsageError(f"unknown provider {name!r} (choose local, docker or ansible)")
