"""Topology rules of the ``gryphon`` protocol (see protocols/__init__.py for the interface).

Minimal and strict for now: every key the protocol engineer adds must be
declared here (unknown keys are errors) and documented in docs/topology.md.
"""

from __future__ import annotations

from testbed.topology.schema import StrictModel
from testbed.topology.units import Time, TimeOrInf


class Params(StrictModel):
    """Top-level ``params`` of a gryphon topology (times in seconds once validated)."""

    gct: Time = 0.2
    nrt: Time = 0.6
    aet: Time = 10.0
    dct: TimeOrInf = float("inf")


class Placement(StrictModel):
    """``placement`` of a gryphon topology."""


class ClientParams(StrictModel):
    """A client group's ``params``."""


NODE_ROLES = {"broker"}
CLIENT_ROLES = {"publisher", "subscriber"}
ACYCLIC = "cells"
