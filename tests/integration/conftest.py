"""Fixtures shared by the integration tests."""

from __future__ import annotations

import os

import pytest

from testbed.errors import ProviderError


@pytest.fixture(scope="module")
def engine():
    """The Docker engine (``testbed.providers.engine.connect``): locally a missing engine skips
    with the reason; in CI (CI=true) it fails."""
    from testbed.providers.engine import connect

    try:
        return connect()
    except ProviderError as e:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI needs a Docker engine: {e}")
        pytest.skip(f"no Docker engine: {e}")
