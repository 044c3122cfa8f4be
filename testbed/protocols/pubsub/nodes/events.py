"""Events of the content-based pub/sub core (clients and brokers).

Clients log what they issue and what they receive; checkers read only these.
``client`` is the logical client id ``<group>-<index>`` (e.g. ``subs-3``);
``pub_id`` is ``<publisher client>:<seq>``, unique in a run.
"""

from testbed.nodes.runtime.events import declare

P = "pubsub"
declare("advertise", P, "A publisher client issued an advertisement.",
        client="str", adv_id="str", filter="str", broker="str")
declare("unadvertise", P, "A publisher client withdrew an advertisement.",
        client="str", adv_id="str", broker="str")
declare("subscribe", P, "A subscriber client issued a subscription.",
        client="str", sub_id="str", filter="str", broker="str")
declare("unsubscribe", P, "A subscriber client withdrew a subscription.",
        client="str", sub_id="str", broker="str")
declare("publish", P, "A publisher client issued a publication (t = send time).",
        client="str", pub_id="str", seq="int", attrs="json", size="int", broker="str")
declare("deliver", P, "A subscriber client received a publication.",
        client="str", pub_id="str", publisher="str", seq="int", pub_t="int", hops="int")
declare("broker_tables", P, "Periodic sizes of a broker's routing tables.",
        srt="int", prt="int", covered="int")

# --- added with the broker and client implementation (routing internals, re-sync) ---
declare("broker_counters", P, "Periodic message counters of a broker (cumulative since start).",
        adv_in="int", unadv_in="int", sub_in="int", unsub_in="int", pub_in="int", pub_out="int",
        pub_unmatched="int", deliver_out="int", adv_out="int", unadv_out="int", sub_out="int",
        unsub_out="int", resync="int", bad="int", sent_subs="int", retired="int")
declare("broker_resync", P, "A broker re-sent routing state to a neighbour whose connection came back.",
        peer="str", advs="int", subs="int")
declare("broker_bad_message", P, "A broker ignored a malformed or unexpected message.",
        peer="str", kind="str", reason="str")
declare("client_resync", P, "A client process re-issued its clients' advs/subs to a broker "
        "whose connection came back (not logged as new advertise/subscribe events).",
        broker="str", advs="int", subs="int")
declare("broker_resync_applied", P, "A broker has applied a re-sync wave: every frame a neighbour or "
        "client process re-sent (wave = '<sender>><receiver>@<ns>'), or passed on for it, up to the "
        "wave's end marker from peer was handled here; fwd = the brokers it carries the wave on to; "
        "full = a full re-sync from peer (what it did not re-send was swept here).",
        peer="str", wave="str", fwd="int", full="bool")
declare("broker_resync_swept", P, "A broker withdrew what it had learnt from a neighbour that the "
        "neighbour's full re-sync (wave) did not re-send: a withdrawal lost while the link was down "
        "(unadvs/unsubs: how many advertisements/subscriptions it withdrew).",
        peer="str", wave="str", unadvs="int", unsubs="int")
