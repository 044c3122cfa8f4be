"""analysis.routes: the route of a (publisher, subscriber) pair, which faults touch it, and when a
restart's or heal's recovery ends (pure: no Spark)."""

from testbed.analysis.routes import Routes, path, recovery_end, route_windows
from testbed.analysis.timeline import FaultWindow

# b1 - b2 - b3      a tree that is not a line: b2 - b4
#       |
#       b4
BROKERS = {"b1": ["b2"], "b2": ["b1", "b3", "b4"], "b3": ["b2"], "b4": ["b2"]}


def plan():
    nodes = {b: {"name": b, "kind": "node", "role": "broker", "neighbors": n} for b, n in BROKERS.items()}
    nodes["pubs"] = {"name": "pubs", "kind": "clients", "role": "publisher", "neighbors": [],
                     "clients": {"name": "pubs", "count": 1, "attach": ["b1"]}}
    nodes["subs"] = {"name": "subs", "kind": "clients", "role": "subscriber", "neighbors": [],
                     "clients": {"name": "subs", "count": 2, "attach": ["b3", "b4"]}}  # subs-0 @ b3, subs-1 @ b4
    return {"nodes": nodes}


def win(ops, targets, planned=(5.0, 7.0), groups=(), fault=0):
    return FaultWindow(fault=fault, ops=tuple(ops), targets=tuple(targets), source="f", planned=planned,
                       actual=planned, status="done", delays_s=(0.0,), groups=groups)


def code(r, pub, sub):
    c = r.client_codes()
    return c[pub] * len(r.endpoints) + c[sub]


def test_path_in_a_tree():
    g = Routes(plan()).graph
    nodes, hops = path(g, "b1", "b3")
    assert nodes == {"b1", "b2", "b3"}
    assert hops == {frozenset({"b1", "b2"}), frozenset({"b2", "b3"})}
    assert path(g, "b4", "b4") == (frozenset({"b4"}), frozenset())


def test_a_node_fault_touches_only_the_routes_through_it():
    r = Routes(plan())
    to3, to4 = code(r, "pubs-0", "subs-0"), code(r, "pubs-0", "subs-1")
    t = r.touched(win(["crash", "restart"], ["b3"]))
    assert to3 in t and to4 not in t
    t = r.touched(win(["stall", "unstall"], ["b2"]))
    assert to3 in t and to4 in t
    t = r.touched(win(["pause", "resume"], ["subs"]))  # the subscriber's own process
    assert to3 in t and to4 in t
    assert not r.touched(win(["crash"], ["b9"]))  # a node on no route


def test_a_cut_touches_the_routes_over_that_hop_and_a_partition_those_it_splits():
    r = Routes(plan())
    to3, to4 = code(r, "pubs-0", "subs-0"), code(r, "pubs-0", "subs-1")
    t = r.touched(win(["cut", "heal"], ["b2", "b4"]))
    assert to4 in t and to3 not in t
    assert not r.touched(win(["cut", "heal"], ["b1", "b3"]))  # not an overlay hop
    t = r.touched(win(["partition", "heal_partition"], [], groups=(("b1", "b2", "b3"), ("b4",))))
    assert to4 in t and to3 not in t
    assert r.touched(win(["set_link"], [])) is None  # any other kind: every route


def test_without_client_groups_every_fault_touches_every_route():
    assert Routes({"nodes": {}}).touched(win(["crash"], ["b3"])) is None


def test_old_logs_a_restart_recovers_when_its_neighbours_have_sent_their_resyncs_plus_the_margin():
    r = Routes(plan())
    w = win(["crash", "restart"], ["b2"], planned=(5.0, 7.0))
    rows = [("b1", "b2", 7.4), ("b2", "b1", 7.3), ("b3", "b2", 7.2), ("b2", "b3", 7.9), ("b4", "b2", 7.6),
            ("b2", "b4", 7.5), ("b1", "b2", 3.0)]  # a re-sync before the restart does not count
    assert recovery_end(w, r.graph, rows, 20.0) == (7.9, "resync-sent")
    # b4 never re-syncs b2 after the restart: the route stays broken until the end of the run
    assert recovery_end(w, r.graph, [x for x in rows if x[0] != "b4"] + [("b4", "b1", 1.0)], 20.0) == (20.0, "never")
    # a stall has no re-sync: its window ends by the margin
    assert recovery_end(win(["stall", "unstall"], ["b2"]), r.graph, rows, 20.0) == (None, "margin")
    (rw,) = route_windows([w], r, rows, margin_s=2.0, end_s=20.0)
    assert (rw.lo, rw.hi, rw.recovered) == (3.0, 9.9, "resync-sent")  # the last sent re-sync (7.9 s) + 2 s


def test_old_logs_a_heal_recovers_when_both_ends_have_sent_their_resyncs():
    r = Routes(plan())
    w = win(["cut", "heal"], ["b2", "b4"], planned=(5.0, 6.0))
    assert recovery_end(w, r.graph, [("b2", "b4", 6.1), ("b4", "b2", 6.3)], 20.0) == (6.3, "resync-sent")


def sent_and_applied(pairs, t_sent, t_applied, fwd=None):
    """The sent rows and the applied rows (at the receiver, wave '<x>><y>@1') of re-syncs x -> y."""
    fwd = fwd or {}
    return ([(x, y, t_sent) for x, y in pairs]
            + [(y, x, t_applied[(x, y)], f"{x}>{y}@1", fwd.get((x, y), 0)) for x, y in pairs])


def test_a_restart_recovers_when_every_resync_was_applied_with_no_margin_after():
    r = Routes(plan())
    w = win(["crash", "restart"], ["b2"], planned=(5.0, 7.0))
    pairs = [(x, y) for n in ("b1", "b3", "b4") for x, y in ((n, "b2"), ("b2", n))] + [("subs", "b3")]
    applied = {p: 7.3 for p in pairs}
    applied[("b4", "b2")] = 7.45  # the last one applied
    rows = sent_and_applied(pairs, 7.2, applied)
    assert recovery_end(w, r.graph, rows, 20.0, {"b3": {"subs"}, "b4": {"subs"}, "b1": {"pubs"}}) == (7.45, "resync")
    (rw,) = route_windows([w], r, rows, margin_s=2.0, end_s=20.0)
    # the window ends when the last re-sync was applied: not the sent re-sync (7.2 s) + 2 s = 9.2 s
    assert (rw.lo, rw.hi, rw.recovered) == (3.0, 7.45, "resync")
    # a direction whose re-sync was sent but never applied keeps the window open to the end
    lost = [x for x in rows if not (len(x) == 5 and x[0] == "b2" and x[1] == "b4")]
    assert recovery_end(w, r.graph, lost, 20.0) == (20.0, "never")


def test_a_restart_waits_for_the_client_processes_attached_to_it():
    r = Routes(plan())
    w = win(["crash", "restart"], ["b4"], planned=(5.0, 7.0))
    pairs = [("b2", "b4"), ("b4", "b2"), ("subs", "b4")]  # subs-1 is attached to b4
    rows = sent_and_applied(pairs, 7.2, {("b2", "b4"): 7.3, ("b4", "b2"): 7.3, ("subs", "b4"): 7.7})
    (rw,) = route_windows([w], r, rows, margin_s=2.0, end_s=20.0)
    assert (rw.hi, rw.recovered) == (7.7, "resync")
    (rw,) = route_windows([w], r, [x for x in rows if x[1] != "subs"], margin_s=2.0, end_s=20.0)
    assert (rw.hi, rw.recovered) == (20.0, "never")  # the subscriber's process never re-synced b4


def test_a_resync_wave_ends_where_it_stops_changing_tables():
    r = Routes(plan())
    w = win(["cut", "heal"], ["b2", "b4"], planned=(5.0, 6.0))
    # b4 re-sends a subscription made during the cut; b2 applies it at 6.2 and carries it on to b1 and
    # b3 (fwd 2), which apply it at 6.5 and 6.6: the window ends there, not at b2's 6.2
    rows = sent_and_applied([("b2", "b4"), ("b4", "b2")], 6.1, {("b2", "b4"): 6.15, ("b4", "b2"): 6.2},
                            fwd={("b4", "b2"): 2})
    rows += [("b1", "b2", 6.5, "b4>b2@1", 0), ("b3", "b2", 6.6, "b4>b2@1", 0)]
    assert recovery_end(w, r.graph, rows, 20.0) == (6.6, "resync")
    # one broker the wave was carried to never applied it: the wave is not over
    assert recovery_end(w, r.graph, rows[:-1], 20.0) == (20.0, "never")


def test_a_crash_written_apart_from_its_restart_ends_at_the_restart():
    r = Routes(plan())
    crash = win(["crash"], ["b2"], planned=(5.0, 7.0), fault=0)  # the expander ends it at the restart
    restart = win(["restart"], ["b2"], planned=(7.0, 7.0), fault=1)
    rows = [("b1", "b2", 7.4), ("b2", "b1", 7.3), ("b3", "b2", 7.2), ("b2", "b3", 7.2), ("b4", "b2", 7.6),
            ("b2", "b4", 7.5)]
    c, s = route_windows([crash, restart], r, rows, margin_s=2.0, end_s=20.0)
    assert (c.lo, c.hi, c.recovered) == (3.0, 7.0, "restart")  # not 7.0 + 2 s
    assert (s.lo, s.hi, s.recovered) == (5.0, 9.6, "resync-sent")


def test_a_restart_also_waits_for_the_sweep_of_the_restarted_brokers_full_resync():
    r = Routes(plan())
    w = win(["crash", "restart"], ["b4"], planned=(5.0, 7.0))
    rows = sent_and_applied([("b2", "b4"), ("b4", "b2")], 7.2, {("b2", "b4"): 7.3, ("b4", "b2"): 7.25})
    assert recovery_end(w, r.graph, rows, 20.0) == (7.3, "resync")
    # b4, once it has re-learnt its state, sends b2 a full re-sync at 7.4: b2 sweeps what it kept from
    # before the restart and carries the withdrawals on to b1 and b3 (applied at 7.6 and 7.7)
    full = rows + [("b4", "b2", 7.4), ("b2", "b4", 7.5, "b4>b2@2", 2, True),
                   ("b1", "b2", 7.6, "b4>b2@2", 0, False), ("b3", "b2", 7.7, "b4>b2@2", 0, False)]
    assert recovery_end(w, r.graph, full, 20.0) == (7.7, "resync")
    assert recovery_end(w, r.graph, full[:-1], 20.0) == (20.0, "never")  # the sweep never reached b3
    # a heal's ends did not restart: a later full re-sync between them is not this fault's
    heal = win(["cut", "heal"], ["b2", "b4"], planned=(5.0, 7.0))
    assert recovery_end(heal, r.graph, full, 20.0) == (7.3, "resync")
