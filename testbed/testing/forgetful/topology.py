"""The forgetful variant takes exactly the pub/sub core's topology keys."""

from testbed.protocols.pubsub.topology import (  # noqa: F401
    ACYCLIC, CLIENT_ROLES, NODE_ROLES, ClientParams, Params, Placement, check)

BUILDS_ON = ("pubsub",)  # its runs log the pub/sub core's events
