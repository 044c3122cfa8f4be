"""cpu_share: each limited node's measured CPU against its share, throttles included (pure part)."""

from __future__ import annotations

from testbed.analysis import capacity as C
from testbed.analysis.runtime_checks import CHECKS, checks_of


def plan(**cpu) -> dict:
    return {"nodes": {n: {"cpu": v} for n, v in cpu.items()}, "actions": []}


def lines(node: str, cores_per_s: list[float], start: float = 0.0) -> list[dict]:
    """cpu lines one second apart using ``cores_per_s[i]`` cores in second i."""
    out, used = [], 0.0
    for i in range(len(cores_per_s) + 1):
        out.append({"node": node, "t_rel_s": start + i, "m": int((start + i) * 1e9),
                    "user_s": used * 0.8, "sys_s": used * 0.2})
        if i < len(cores_per_s):
            used += cores_per_s[i]
    return out


def throttle(node: str, at: float, cpu, op: str = "throttle", status: str = "done") -> dict:
    return {"op": op, "target": [node], "actual_s": at, "done_s": at + 0.001, "status": status, "cpu": cpu}


def test_within_share_passes_and_over_fails() -> None:
    ok = C.cpu_share_of(plan(b1=0.2, b2=None), {}, lines("b1", [0.2, 0.19, 0.21]) + lines("b2", [1.0, 1.0]))
    assert ok.passed and ok.details["limited_nodes"] == ["b1"] and ok.details["intervals"] == 3
    bad = C.cpu_share_of(plan(b1=0.2), {}, lines("b1", [0.2, 0.35, 0.2]))
    assert not bad.passed and bad.violations == 1
    assert bad.examples[0]["from_s"] == 1.0 and bad.examples[0]["used_cores"] == 0.35
    # the sampling error: 0.2 * (1 + 2 * 0.1 / 1) + 0.01 = 0.25
    assert C.cpu_share_of(plan(b1=0.2), {}, lines("b1", [0.249])).passed
    assert not C.cpu_share_of(plan(b1=0.2), {}, lines("b1", [0.251])).passed


def test_throttle_window_uses_the_share_in_force() -> None:
    manifest = {"timeline": [throttle("b1", 1.95, 0.1), throttle("b1", 4.0, None, op="unthrottle")]}
    # unlimited node throttled to 0.1 from 2s to 4s: 0.8 core outside is fine, 0.12 inside too
    use = [0.8, 0.8, 0.12, 0.11, 0.8]
    assert C.cpu_share_of(plan(b1=None), manifest, lines("b1", use)).passed
    # using 0.5 core inside the window is a violation
    bad = C.cpu_share_of(plan(b1=None), manifest, lines("b1", [0.8, 0.8, 0.5, 0.11, 0.8]))
    assert not bad.passed and [e["from_s"] for e in bad.examples] == [2.0]
    # an interval the change falls in gets the larger share: 0.8 in [1.5, 2.5] is not judged by 0.1
    assert C.cpu_share_of(plan(b1=None), manifest, lines("b1", [0.8], start=1.5)).passed
    # a throttle that failed changed nothing
    failed = {"timeline": [throttle("b1", 2.0, 0.1, status="failed")]}
    assert C.share_changes({}, failed) == {}


def test_injected_throttle_and_restart() -> None:
    # the change falls somewhere in [actual_s, done_s]: an interval that begins inside that
    # span is judged by the larger (old) share
    assert C.cpu_share_of(plan(b1=None), {"injected": [throttle("b1", 1.0, 0.1)]}, lines("b1", [0.5, 0.3])).passed
    manifest = {"injected": [throttle("b1", 0.95, 0.1)]}
    rows = lines("b1", [0.5, 0.1, 0.1])
    rows += [{"node": "b1", "t_rel_s": 3.5, "m": 100, "user_s": 0.0, "sys_s": 0.0}]  # a new life: skipped
    assert C.cpu_share_of(plan(b1=None), manifest, rows).passed
    assert not C.cpu_share_of(plan(b1=None), manifest, lines("b1", [0.5, 0.3])).passed


def test_share_over() -> None:
    ch = [(2.0, 2.01, 0.1), (4.0, 4.01, 0.3)]
    assert C.share_over(0.2, ch, 0.0, 1.0) == 0.2
    assert C.share_over(0.2, ch, 2.5, 3.5) == 0.1
    assert C.share_over(0.2, ch, 1.5, 2.5) == 0.2
    assert C.share_over(0.2, ch, 3.5, 4.5) == 0.3
    assert C.share_over(None, ch, 1.0, 2.5) is None


def test_checks_of_adds_cpu_share_only_when_limited() -> None:
    assert checks_of(plan(b1=None), {}) == CHECKS
    assert checks_of(plan(b1=0.5), {}) == CHECKS + [C.check_cpu_share]
    assert checks_of(plan(b1=None), {"timeline": [throttle("b1", 1.0, 0.1)]})[-1] is C.check_cpu_share


def test_cpu_series() -> None:
    s = C.cpu_series(plan(b1=0.2), {}, lines("b1", [0.1, 0.2]))
    assert s == {"b1": [{"t_s": 0.5, "cores": 0.1, "share": 0.2}, {"t_s": 1.5, "cores": 0.2, "share": 0.2}]}


def test_share_steps_and_figure(tmp_path) -> None:
    manifest = {"timeline": [throttle("b1", 2.0, 0.1), throttle("b1", 4.0, 0.5, op="unthrottle")]}
    steps = C.share_steps(plan(b1=0.5, b2=None), manifest, 0.0, 9.0)
    assert steps == {"b1": [(0.0, 0.5), (2.0, 0.1), (4.0, 0.5), (9.0, 0.5)]}
    series = C.cpu_series(plan(b1=0.5, b2=None), manifest, lines("b1", [0.4] * 8) + lines("b2", [0.9] * 8))
    out = C.cpu_figure(series, [{"fault": 0, "ops": ["throttle"], "actual": [2.0, 4.0]}], tmp_path / "cpu.png",
                       steps=steps)
    assert out.stat().st_size > 10_000
    assert C.cpu_figure({}, [], tmp_path / "none.png") is None
