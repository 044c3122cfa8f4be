"""Topology rules of the ``gryphon`` protocol (Bhola et al., exactly-once delivery).

``params`` (times in seconds once validated; the node side reads the same keys,
see ``testbed/nodes/gryphon/broker.py:DEFAULTS``):

``mode``          ``gd`` (guaranteed delivery) or ``best-effort`` (no knowledge, curiosity,
                  logging or retransmission: the Fig 4-5 baseline)
``gct``           gap curiosity threshold
``nrt``           the minimum nack repetition interval (NRT is estimated like TCP's RTO)
``nrt_max``       the cap of NRT's exponential backoff
``aet``           ack expected threshold at pubends
``dct``           delay curiosity threshold (``inf``: none)
``ack_interval``  how often subends/brokers send consolidated acks upstream
``ls_interval``   period of the link status messages between neighbours and cell peers
``link_timeout``  a neighbour not heard for this long is treated as failed (a crash is
                  seen at once through the lost connection)
``log_sync``      group-commit interval of the PHB's stable log (fsync)
``silence``       a pubend idle for this long turns its Q ticks up to now into F
``nack_chunk``    nacks are chopped into ranges of at most this many ticks (ms)
``settle``        wait after the nodes are up before the workload starts

Client group ``params``: publishers ``attr_space`` (messages carry ``k = n % attr_space``);
subscribers ``filter_mod`` (client i subscribes ``[k,eq,i % filter_mod]``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from testbed.topology.schema import StrictModel
from testbed.topology.units import Time, TimeOrInf


class Params(StrictModel):
    """Top-level ``params`` of a gryphon topology (times in seconds once validated)."""

    mode: Literal["gd", "best-effort"] = "gd"
    gct: Time = 0.2
    nrt: Time = 0.6
    nrt_max: Time = 10.0
    aet: Time = 10.0
    dct: TimeOrInf = float("inf")
    ack_interval: Time = 0.1
    ls_interval: Time = 0.2
    link_timeout: Time = 1.0
    log_sync: Time = 0.005
    silence: Time = 0.5
    nack_chunk: Time = 0.5
    settle: Time = 1.0


class Placement(StrictModel):
    """``placement`` of a gryphon topology."""


class PublisherParams(StrictModel):
    attr_space: int = Field(1000, ge=1)


class SubscriberParams(StrictModel):
    filter_mod: int | None = Field(None, ge=1)


ClientParams = {"publisher": PublisherParams, "subscriber": SubscriberParams}

NODE_ROLES = {"broker"}
CLIENT_ROLES = {"publisher", "subscriber"}
ACYCLIC = "cells"
