"""The broken broker: the PADRES broker without the re-sync of a neighbour that comes back."""

from __future__ import annotations

from testbed.protocols.pubsub.nodes import Broker
from testbed.testing.forgetful.nodes import events as _events  # noqa: F401  (registers its event)


class ForgetfulBroker(Broker):
    def on_peer_up(self, peer: str) -> None:
        if peer in self._nset:  # the bug: a restarted neighbour is not told what it needs
            self.rt.log("forgetful_no_resync", peer=peer)
