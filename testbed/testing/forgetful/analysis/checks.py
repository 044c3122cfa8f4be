"""The forgetful variant is checked with the pub/sub core's checks (it claims the same properties)."""

from testbed.protocols.pubsub.analysis.checks import CHECKS as PUBSUB

CHECKS = list(PUBSUB)
