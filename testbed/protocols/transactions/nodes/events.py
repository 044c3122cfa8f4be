"""Events of the transactions protocol (spec section 3), declared once.

Ids: a transaction is ``<coordinator client>.<thread>:<n>`` (``n`` counts from 1 per
thread); an operation is ``<tx>/<n>`` with ``n`` = 1..5 the scenario's op number
(op1 E's tcm/pub to D, op2 D's assign tcm to A, op3 A's sub, op4 D's usub, op5 E's pub).
Outcomes are ``committed`` or ``aborted`` (BL-WAIT: ``committed`` = A acknowledged op5,
``aborted`` = the timeout passed first).
"""

from testbed.nodes.runtime.events import declare

P = "transactions"
declare("tx_begin", P, "A TXC thread began a transaction (t = the latency timer's start); kind: "
        "'dispatch' (the scenario's five operations) or 'probe' (a conflict run's publication op6 into "
        "the event space of the dispatch to agent/dispatcher, params.conflict).",
        tx="str", client="str", thread="int", agent="str", dispatcher="str", variant="str", kind="str")
declare("tx_op", P, "A client issued a transaction operation (deps: op ids it must follow; "
        "trigger: the op whose receipt made the client issue it, '' if none).",
        tx="str", op_id="str", n="int", kind="str", client="str", deps="list[str]",
        trigger="str", filter="str", sub_id="str")
declare("tx_proc", P, "A broker processed a transaction operation (k: its processing counter; "
        "dests: next hops, clients as '<process>/<client>').",
        tx="str", op_id="str", kind="str", dests="list[str]", k="int")
declare("tx_phase", P, "A broker's transaction phase step: init, prepare (conflict = the "
        "conflict check's answer), commit, abort; ssid = the base snapshot (commit: the new one).",
        tx="str", phase="str", ssid="int", conflict="bool")
declare("tx_recv", P, "A client received a transaction operation (publications are buffered).",
        client="str", tx="str", op_id="str", kind="str", n="int")
declare("tx_deliver", P, "A client delivered a transaction publication to the application.",
        client="str", tx="str", op_id="str", n="int")
declare("tx_discard", P, "A client discarded a buffered publication of an aborted transaction.",
        client="str", tx="str", op_id="str", n="int")
declare("tx_outcome", P, "A client learned (or, at the TXC, decided) a transaction's outcome.",
        client="str", tx="str", outcome="str")
declare("tx_end", P, "A transaction ended at its TXC: latency_ms from tx_begin until the "
        "agent's acknowledgement of op5 (committed), or until the abort (aborted); -1 if the "
        "acknowledgement never came.",
        tx="str", client="str", outcome="str", latency_ms="float", reason="str")
declare("tx_tables", P, "A broker's routing tables at stop: {id: last hop} per SRT and PRT entry.",
        srt="json", prt="json", ssid="int")
declare("tx_round", P, "Fig 9: a coordinator's dispatch round began (phase start) or ended (end).",
        client="str", round="int", phase="str")
declare("tx_held", P, "A (re)started broker held transaction messages while it re-learned its routing "
        "state (params.settle after its start), and now processes them.", count="int")
declare("tx_snapshot_missing", P, "D-TX: a transaction's init named a snapshot (ssid) this broker no longer "
        "or not yet holds (current: its own counter, kept: the versions it holds); the transaction's "
        "prepare here votes abort (never a silent fall back to the current table).",
        tx="str", ssid="int", current="int", kept="list[int]")
declare("tx_ssid_resync", P, "D-TX/D-TXNI: a (re)started broker adopted a neighbour's snapshot counter "
        "(old: its own) before taking part in a transaction.", peer="str", old="int", ssid="int")
declare("tx_hold_timeout", P, "S-TX: a commit or abort held for dependencies (missing: their op ids) "
        "longer than params.hold_timeout was applied without them.",
        tx="str", outcome="str", waited_ms="float", missing="list[str]")
declare("tx_known_resync", P, "S-TX: a (re)started broker learned from a neighbour or a local client (peer) "
        "that it had processed ops operations before it restarted (txknown); they are not processed again.",
        peer="str", ops="int")
declare("tx_resync_done", P, "S-TX: a restarted broker was re-synchronised by every neighbour (txknown) and "
        "every client process (txsynced) it had before (missing: those that did not come within "
        "params.resync_wait after settle); waited_ms since its start. Its held messages go on from here.",
        waited_ms="float", missing="list[str]")
declare("tx_commit_resync", P, "D-TX: a broker committed a transaction while a neighbour had been re-synchronised "
        "(its connection came back: it restarted) during it; the commit's routing changes toward those peers "
        "were sent to them as plain routing messages (msgs of them).",
        tx="str", peers="list[str]", msgs="int")
declare("tx_reissue", P, "D-TX/D-TXNI: a client learned the commit of a transaction whose routing operations "
        "(ops: their ids) its broker may have lost (the broker restarted while the transaction was open) and "
        "sent them again as plain routing messages.", client="str", tx="str", ops="list[str]")
