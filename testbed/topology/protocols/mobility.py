"""Topology rules of the ``mobility`` protocol (see protocols/__init__.py for the interface).

Minimal and strict for now: every key the protocol engineer adds must be
declared here (unknown keys are errors) and documented in docs/topology.md.
"""

from __future__ import annotations

from testbed.topology.schema import StrictModel


class Params(StrictModel):
    """Top-level ``params`` of a mobility topology."""


class Placement(StrictModel):
    """``placement`` of a mobility topology."""


class ClientParams(StrictModel):
    """A client group's ``params``."""


NODE_ROLES = {"broker"}
CLIENT_ROLES = {"publisher", "subscriber"}
ACYCLIC = "forest"
