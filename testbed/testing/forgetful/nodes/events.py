"""Events of the forgetful variant (the pub/sub core's events are logged too)."""

from testbed.nodes.runtime.events import declare

declare("forgetful_no_resync", "forgetful", "A neighbour came (back) up and the broker did not re-sync it.",
        peer="str")
