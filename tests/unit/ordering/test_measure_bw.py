"""ordering's _measure_bw (the evidence of Figs 10-12's explanations) on run directories: it read
each run's setup with a name only analyze() had imported, so a reproduction with rate runs ended
in a NameError after all its runs were made."""

from __future__ import annotations

import json

from testbed.protocols.ordering import experiments as O


class Ctx:
    def __init__(self):
        self.measured: dict[int, dict] = {}

    def measure(self, figure: int, **values):
        self.measured.setdefault(figure, {}).update(values)


def _run(tmp_path, name: str, shape: float, rate: int) -> str:
    d = tmp_path / name
    d.mkdir()
    plan = {"point": {"shape": shape, "rate": rate}, "repeat_index": 0,
            "nodes": {"c1": {"clients": {"count": 10, "rate_per_s": rate / 10, "extra": {"topics_per_client": 10}}},
                      "tm1": {}}}
    (d / "plan.json").write_text(json.dumps(plan))
    return str(d)


def test_measure_bw_reads_each_runs_shape_and_records_the_predicted_and_measured_shares(tmp_path):
    dirs = {"a": _run(tmp_path, "a", 0.901, 500), "b": _run(tmp_path, "b", 0.349, 500)}
    pred = {"a": {"forwarding_pct": {"tm3": 10.0, "tm4": 30.0, "tm5": 20.0}, "chain_servers_mean": 2.5},
            "b": {"forwarding_pct": {"tm3": 40.0}, "chain_servers_mean": 4.0}}
    per_shape = {0.901: [{"tm3": 12.0, "tm4": 25.0, "tm5": 28.0}], 0.349: [{"tm3": 45.0}]}
    ctx = Ctx()
    O._measure_bw(ctx, per_shape, pred, dirs, {})
    assert ctx.measured[11] == {"pred_tm45": [30.0], "pred_tm3": [10.0], "meas_tm45": [28.0], "meas_tm3": [12.0]}
    assert ctx.measured[10] == {"chain_901": 2.5, "chain_349": 4.0}
    assert ctx.measured[12] == {"meas_901": [{"tm3": 12.0, "tm4": 25.0, "tm5": 28.0}]}
