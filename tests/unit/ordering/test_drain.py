"""A notification that is only buffered does not re-scan the buffer (issue #12: with many
co-subscribers the subscription phase buffers thousands of dummies, and a scan per
notification was quadratic). Behaviour is unchanged: TNO and completeness still hold."""

import pytest

from testbed.analysis.ordering.history import check_completeness, check_tno
from testbed.nodes.ordering.core import OrderingModule

from .harness import Sim


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_many_cosubscribers_keep_order_with_fewer_scans(seed, monkeypatch):
    scans = {"n": 0, "notes": 0, "buffered": 0}
    real, real_notify = OrderingModule._drain, OrderingModule.on_ens_notify

    def counting(self):
        scans["n"] += 1
        return real(self)

    def notify(self, ev):
        scans["notes"] += 1
        before = len(self.to_deliver)
        real_notify(self, ev)
        scans["buffered"] += len(self.to_deliver) > before

    monkeypatch.setattr(OrderingModule, "_drain", counting)
    monkeypatch.setattr(OrderingModule, "on_ens_notify", notify)
    sim = Sim(n_topics=6, seed=seed, delay=(0.001, 0.08))
    clients = [sim.client(f"c{i}") for i in range(30)]
    for i, m in enumerate(clients):  # everyone on the hot topics 0 and 1, plus one more
        sim.at(0.001 * i, m.subscribe_many, [0, 1, 2 + i % 4])
    for k in range(60):
        sim.at(1.0 + 0.01 * k, clients[k % 30].publish, {"k": k}, k % 3)
    sim.run()
    hist = sim.history
    assert check_tno(hist)["passed"]
    comp = check_completeness(hist)
    assert comp["passed"] and comp["expected"] > 500
    # every buffered-only notification skipped the scan
    assert scans["buffered"] > 50, scans
    assert scans["n"] <= scans["notes"] - scans["buffered"] + 30 * 3 * 2, scans
    for m in clients:  # nothing ready was left behind
        assert not m.to_deliver
