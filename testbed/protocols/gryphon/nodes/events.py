"""Events of the Gryphon exactly-once protocol (Bhola et al.).

Checkers and figures read only these (plus the runtime's ``cpu`` events).
``pubend`` is ``<phb>/<publisher client>``; ``tick`` is the pubend's tick
(wall-clock ms at the PHB); ``client`` is the logical client id.
"""

from testbed.nodes.runtime.events import declare

P = "gryphon"
declare("g_publish", P, "A publisher client sent a message to its PHB (t = send time).",
        client="str", pubend="str", seq="int", size="int", broker="str")
declare("g_logged", P, "The PHB made messages stable (fsync'd): they are published. "
        "keys = each message's integer attribute k (-1 if none), for filter-aware checks; "
        "recovered=true re-reports records read back from the log after a restart.",
        pubend="str", ticks="list[int]", seqs="list[int]", keys="list[int]", recovered="bool")
declare("g_recover", P, "A restarted PHB rebuilt a pubend from its stable log.",
        pubend="str", records="int", last_tick="int", horizon="int")
declare("g_subscribe", P, "A subscriber client registered at its SHB (filter: JSON list of [attr, op, value]).",
        client="str", filter="str", broker="str")
declare("g_deliver", P, "A subscriber client received a message (t = receive time).",
        client="str", pubend="str", tick="int", seq="int", pub_t="int", broker="str")
declare("g_nack", P, "A nack sent upstream (origin subend: a subend's curiosity; broker: "
        "consolidated at an intermediate broker). range_ms = hi - lo ticks.",
        pubend="str", lo="int", hi="int", range_ms="int", to="list[str]", origin="str", reason="str")
declare("g_retx", P, "A nack satisfied from this broker's knowledge (retransmission sent down).",
        pubend="str", to="str", lo="int", hi="int", d_count="int")
declare("g_ackexp", P, "AckExpected sent down by a pubend (T = ticks below it must be acked).",
        pubend="str", tick="int", cells="list[str]")
declare("g_route", P, "The link chosen for a pubend's traffic towards a downstream cell changed.",
        pubend="str", cell="str", via="str", sideways="bool")
declare("g_peer", P, "The protocol's view of a neighbour/cell peer changed (link status).",
        peer="str", up="bool", reason="str")
declare("g_stats", P, "Periodic protocol counters of a broker.",
        mode="str", pubends="int", istreams="int", ostreams="int", subends="int",
        subscribers="int", gap_ticks="int", delivered="int", nacks="int", retx="int",
        held_d="int")
