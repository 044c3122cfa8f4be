"""Events of the ordering protocol (Baldoni et al.).

Client-side (``client`` = logical client ``<group>-<i>``):
``o_subscribed`` / ``o_unsubscribe`` bracket the time a client holds a topic;
``o_timestamp`` is one completed timestamp (and the ENS publication that follows
it at once); ``o_notify`` one notification, in the client's notification order
``n``. TM-server side: cumulative counters in ``o_tm_stats``.
"""

from testbed.nodes.runtime.events import declare

P = "ordering"
declare("o_subscribed", P, "subscribe(T) returned (COMPLETED_SUB_VC received); latency from the call; "
        "ts = the subscription timestamp, flat [topic, sn, ...] (each sn is the subscription's dummy).",
        client="str", topic="int", latency_ms="float", size="int", ts="list[int]")
declare("o_unsubscribe", P, "unsubscribe(T) was called (Fig 5a).", client="str", topic="int")
declare("o_timestamp", P,
        "A timestamp came back (EVENT_TS) and the event went to the ENS (t). t0 = wall ns of the "
        "publish() call; latency_ms = EVENT_TS arrival - publish() call (monotonic); sn = the "
        "event's sequence number in its topic (ts[topic]).",
        client="str", eid="str", topic="int", sn="int", size="int", latency_ms="float", hops="int",
        servers="list[str]", tries="int", t0="int")
declare("o_notify", P,
        "The ordering module notified an event to the application; n = position in this client's "
        "notification order; ooo = tagged out-of-order (Sec 4, unreliable mode).",
        client="str", eid="str", topic="int", ts="list[int]", ooo="bool", n="int", wait_ms="float")
declare("o_client_stats", P, "Periodic per-process counters of the ordering modules.",
        published="int", notified="int", ooo="int", buffered="int", retries="int", forced="int",
        pending_ts="int", subscribed="int")
declare("o_tm_stats", P,
        "Cumulative TM-server counters. relayed: chain messages passed on to a server further down "
        "the pipeline (docs/ordering.md). ts_bytes_handled: bytes of every publication timestamp a TM "
        "step here produced; ts_bytes_remote: those forwarded to a TM on another server.",
        created="int", filled="int", completed="int", sub_steps="int", update_subs="int",
        ts_bytes_handled="int", ts_bytes_remote="int", msgs_remote="int", local_hops="int",
        retries_answered="int", relayed="int", tms="int")
declare("o_stuck", P,
        "An event held back by a client's ordering module longer than params.stuck_after (logged "
        "once), or still held back when the process stops (final). waits = [[topic, have, need, "
        "tm server], ...]: sub_LC[topic] is have and must reach need first; sub = the client's "
        "own pending subscription the event waits for (events of a topic being subscribed).",
        client="str", eid="str", topic="int", ts="list[int]", dummy="bool", age_ms="float",
        final="bool", waits="json", sub="str")
declare("o_tm_recovered", P,
        "A TM server with params.tm_recovery restarted and replayed its log (replayed messages; "
        "outstanding = chain messages to other servers it re-sends until acknowledged).",
        replayed="int", outstanding="int")
