"""Events of the mobility protocol (declared once; the Spark checks read only these).

Mobile clients live in broker processes and log the pub/sub core's ``subscribe``,
``unsubscribe`` and ``deliver`` events (``node`` = the broker hosting the copy). A move id
``mid`` is ``<client>#<n>`` (n counts the client's moves, rejected and aborted ones included).
"""

from testbed.nodes.runtime.events import declare

P = "mobility"
declare("move_begin", P, "A source broker began moving a client (MOVE reached it).",
        mid="str", client="str", src="str", dst="str", movement="str", path="list[str]")
declare("move_end", P, "The source's end of a move: outcome commit | abort | reject; dur_ms from "
        "move_begin on the source's clock.",
        mid="str", client="str", src="str", dst="str", movement="str", outcome="str", dur_ms="float",
        path_len="int")
declare("client_state", P, "A client copy changed state: copy src | tgt | init; state started | "
        "stopped | clean | queued | discarded.",
        mid="str", client="str", copy="str", state="str")
declare("move_step", P, "A coordinator step at the source or target: xfer_sent (4) | xfer_recv (4) | "
        "reject_sent (3) | abort_sent | discard | done_recv (5) | xfer_resent (the source re-sends (4): no "
        "(5) within move_timeout) | xfer_dup (the target got (4) again: answers (5) again, no merge) | "
        "xfer_adopt (a restarted target without the queued copy starts the client from (4)) | abort_resent "
        "(ABORT sent again to a neighbour whose connection came back) | wave_peer_lost (a covering wave "
        "stops waiting for the acknowledgements of a neighbour whose connection was lost).",
        mid="str", client="str", step="str")
declare("move_merge", P, "The target merged a moved client: payload notifications delivered, its own "
        "queue's length, and how many queued ids were skipped as already delivered at the source.",
        mid="str", client="str", payload="int", queued="int", skipped="int")
declare("rt_change", P, "A routing-table change caused by a move: op prepare | commit | abort (tentative "
        "entries) | add | del (PRT entries) | fwd | retract (subscriptions sent to a neighbour); owner = "
        "the client the entry belongs to.",
        mid="str", id="str", owner="str", op="str", table="str", hop="str")
declare("rt_dump", P, "A broker's routing tables at shutdown: prt/srt [[id, hop, filter]], tentative "
        "[[mid, id, hop]].", prt="json", srt="json", tentative="json")
declare("move_traffic", P, "Messages this broker sent over overlay links on behalf of a move since the "
        "last report (by kind and by link); summed per mid they are the move's messages.",
        mid="str", msgs="int", by_kind="json", by_link="json")
declare("move_skipped", P, "A MOVE that could not start here (client not started here, already "
        "moving, unknown broker, or the run is ending).", client="str", dst="str", reason="str")
