"""Issue #34: an ordering topology on three WAN sites that leaves ``ens_settle`` out runs with
the value derived from its links, and the ordering checks hold on its history (no Spark: the
plain-Python history checks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api
from testbed.protocols.ordering.analysis.history import check_completeness, check_tno
from testbed.protocols.ordering.analysis.logs import load_history

pytestmark = [pytest.mark.slow]


def test_three_wan_sites_without_ens_settle_run_with_the_derived_value(tmp_path):
    from tests.unit.ordering.test_ens_settle_derived import TOPO

    topo = tmp_path / "wan3.yaml"
    topo.write_text(TOPO.replace("{extra}", ""))
    [rd] = api.run(str(topo), runs_dir=str(tmp_path / "runs"), analyze=False)
    run = Path(rd.path)
    plan = json.loads((run / "plan.json").read_text())
    assert plan["params"]["ens_settle"] == pytest.approx(0.4) and "ens_settle" in plan["derived"]
    cfg = json.loads((run / "configs" / "cb.json").read_text())
    assert cfg["params"]["ens_settle"] == pytest.approx(0.4)  # what the client host waits
    hist = load_history(run)
    notes = [h for h in hist if h["ev"] == "o_notify"]
    assert len(notes) > 20
    assert check_tno(hist)["passed"]
    comp = check_completeness(hist, until=max(h["t"] for h in notes) - 1.0)
    assert comp["passed"] and comp["expected"] > 10, comp
