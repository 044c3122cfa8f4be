"""scripts/transactions_sweep.py: a failed run is shown as BL-WAIT's no-recovery finding only when
every check it failed is BL-WAIT's P2 in a run with a crash; it stays a failure either way."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "transactions_sweep.py"


def _script():
    spec = importlib.util.spec_from_file_location("transactions_sweep", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_finding_of_names_blwait_p2_after_a_crash_and_nothing_else():
    f = _script().finding_of
    p2, p4 = "transactions.p2_routing", "transactions.p4_agreement"
    assert f("blwait", True, {p2: 3}) == "blwait-no-recovery"
    assert f("blwait", True, {p2: 3, p4: 1}) == ""  # P4 is not explained by it: unexpected
    assert f("blwait", False, {p2: 1}) == ""  # no crash: nothing explains it
    assert f("dtx", True, {p2: 1}) == ""
    assert f("stx", True, {"transactions.p5_tables": 2}) == ""
    assert f("blwait", True, {}) == ""
