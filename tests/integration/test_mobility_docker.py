"""One quick point of the mobility paper in real containers: Fig 11 (the covered root moves) under
``--provider docker``, the 14-broker tree of Fig 6, analysed with P1-P9; the figure's numbers read
back with the reproduction's own reader (``testbed.protocols.mobility.analysis.measure``).

Marker ``docker``: locally a missing engine skips with the reason; in CI (CI=true) it fails.
Only this run's containers and networks are looked at (by its run id label); nothing else is
touched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api
from testbed.testing.dockerlab import labeled

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def test_fig11_point_in_containers(engine, tmp_path):
    from testbed.protocols.mobility.analysis import measure as M
    from testbed.analysis.session import spark_session
    from testbed.protocols.mobility.experiments import warmup_s

    topo = ROOT / "topologies" / "mobility" / "fig11-quick.yaml"
    (rd,) = api.run(str(topo), set_vars={"movement": "reconfiguration", "duration": "16s"}, provider="docker",
                    runs_dir=str(tmp_path / "runs"))
    try:
        m = rd.manifest
        assert m["provider"] == "docker"
        assert {p.stem for p in rd.logs_dir.glob("*.jsonl")} == set(rd.plan().nodes)
        checks = {c["name"]: c for c in api.run_checks(rd)}
        props = [n for n in checks if n[:2] in {f"P{i}" for i in range(1, 10)}]
        assert len(props) == 9, sorted(checks)
        assert all(checks[n]["passed"] for n in props), {n: checks[n] for n in props if not checks[n]["passed"]}
        plan = json.loads((rd.path / "plan.json").read_text())
        df = M.annotate(M.moves(spark_session(), {"r": str(rd.path)}), plan)
        assert set(df["client"]) == {"root-0"}  # only the covered root moves
        assert set(df["workload"]) == {"covered"} and set(df["template"]) == {1}
        s = M.summary(df, warmup_s(plan, "quick"))
        assert s["commits"] >= 2 and s["outcomes"] == {"commit": s["commits"]}, s
        assert s["msgs_per_move"] == 24.0  # (1), (2), (4), (5) over each of the 6 links
    finally:
        assert labeled(engine, rd.run_id) == []
