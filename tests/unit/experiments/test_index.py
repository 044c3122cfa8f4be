"""The run index: the key changes with the rendered topology, --set values, seed, repeat and code; reuse otherwise."""

import json
import os

from testbed.experiments.index import RunIndex, code_version, run_finished, run_key


def test_key_depends_on_everything_that_decides_a_run():
    base = dict(rendered="a: 1\n", set_vars={"rate": 500}, seed=1, repeat=0, provider="local", code="c1")
    k = run_key(**base)
    assert run_key(**base) == k  # unchanged -> reused
    assert run_key(**{**base, "rendered": "a: 2\n"}) != k
    assert run_key(**{**base, "set_vars": {"rate": 1000}}) != k
    assert run_key(**{**base, "seed": 2}) != k
    assert run_key(**{**base, "repeat": 1}) != k
    assert run_key(**{**base, "code": "c2"}) != k
    assert run_key(**{**base, "provider": "docker"}) != k
    assert run_key(**base, kind="compute") != k


def test_code_version_follows_the_run_code_but_not_presentation(tmp_path):
    (tmp_path / "nodes").mkdir()
    (tmp_path / "analysis").mkdir()
    (tmp_path / "nodes" / "n.py").write_text("x = 1\n")
    (tmp_path / "analysis" / "a.py").write_text("y = 1\n")
    (tmp_path / "ui.py").write_text("z = 1\n")
    v0 = code_version(False, str(tmp_path))
    code_version.cache_clear()
    (tmp_path / "ui.py").write_text("z = 2\n")
    (tmp_path / "analysis" / "a.py").write_text("y = 2\n")
    assert code_version(False, str(tmp_path)) == v0
    a0 = code_version(True, str(tmp_path))
    code_version.cache_clear()
    (tmp_path / "analysis" / "a.py").write_text("y = 3\n")
    assert code_version(True, str(tmp_path)) != a0
    (tmp_path / "nodes" / "n.py").write_text("x = 2\n")
    assert code_version(False, str(tmp_path)) != v0
    code_version.cache_clear()


def test_index_persists_atomically_and_checks_runs(tmp_path):
    idx = RunIndex(tmp_path / "index-quick.json")
    idx.put("k1", {"run": str(tmp_path / "r1")})
    assert json.loads((tmp_path / "index-quick.json").read_text()) == {"k1": {"run": "r1"}}  # relative to it
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    assert RunIndex(tmp_path / "index-quick.json").get("k1") == {"run": str(tmp_path / "r1")}
    r1 = tmp_path / "r1"
    (r1 / "logs").mkdir(parents=True)
    (r1 / "manifest.json").write_text(json.dumps({"status": "up"}))
    assert not run_finished(str(r1))  # killed mid-run
    (r1 / "manifest.json").write_text(json.dumps({"status": "collected"}))
    assert not run_finished(str(r1))  # no logs
    (r1 / "logs" / "b1.jsonl").write_text("{}\n")
    assert run_finished(str(r1)) and not run_finished(str(r1), analyzed=True)
    (r1 / "analysis" / "parquet").mkdir(parents=True)
    (r1 / "analysis" / "checks.json").write_text("{}")
    assert run_finished(str(r1), analyzed=True)
    assert not run_finished(None) and not run_finished(str(tmp_path / "nope"))


def test_eta_scales_with_each_remaining_runs_duration():
    from testbed.experiments.runner import OVERHEAD_S, _fmt_s, eta_s

    assert eta_s([(5.0, False), (20.0, True)], {}) == 25.0 + 2 * OVERHEAD_S
    # overheads per kind: an analysed run (per-run Spark) costs its own measured overhead
    assert eta_s([(5.0, False), (20.0, False), None], {False: [4.0, 6.0]}) == 5 + 5 + 20 + 5 + 1
    assert eta_s([(5.0, False), (20.0, True)], {False: [4.0], True: [60.0]}) == 5 + 4 + 20 + 60
    assert eta_s([(20.0, True)], {False: [4.0], True: []}) == 24.0  # none of its kind yet: any run's
    assert eta_s([], {False: [3.0]}) == 0
    assert _fmt_s(125) == "2m05s" and _fmt_s(3725) == "1h02m"


def test_run_phases_split_a_runs_wall_time():
    from testbed.experiments.runner import PHASES, phase_line, run_phases

    m = {"up_s": 4.0, "schedule_s": 15.5, "collect_s": 1.5, "down_s": 2.0}
    p = run_phases(m, settle_s=6.0, duration_s=5.0, elapsed_s=30.0)
    assert p == {"up": 4.0, "settle": 6.0, "workload": 5.0, "drain": 4.5, "collect": 1.5, "down": 2.0,
                 "other": 7.0}
    assert sum(p.values()) == 30.0 and tuple(p) == PHASES
    # an older manifest without schedule_s: the schedule is taken as settle + duration
    assert run_phases({"up_s": 1.0}, 2.0, 5.0, 10.0)["other"] == 2.0
    line = phase_line({"rate": {"runs": 2, "wall_s": 60.0, **p}, "subs": {"runs": 1, "wall_s": 30.0, **p}})
    assert "rate: 2 runs, 60 s: up 4, settle 6" in line and "all runs: 3 runs, 90 s: up 8, settle 12" in line


def test_code_version_treats_a_protocol_package_like_the_generic_parts(tmp_path):
    """A protocol's nodes and topology decide its runs; its analysis only analysed entries; its
    experiments (claims, grids) none: editing a claim must not make every run again."""
    pkg = tmp_path / "protocols" / "p"
    for d in ("nodes", "analysis", "experiments"):
        (pkg / d).mkdir(parents=True)
    (pkg / "nodes" / "n.py").write_text("x = 1\n")
    (pkg / "topology.py").write_text("t = 1\n")
    (pkg / "analysis" / "a.py").write_text("a = 1\n")
    (pkg / "experiments" / "claims.py").write_text("c = 1\n")
    (tmp_path / "protocols" / "q").mkdir()
    (tmp_path / "protocols" / "q" / "experiments.py").write_text("e = 1\n")
    code_version.cache_clear()
    v0, a0 = code_version(False, str(tmp_path)), code_version(True, str(tmp_path))
    for f, text in ((pkg / "experiments" / "claims.py", "c = 2\n"),
                    (tmp_path / "protocols" / "q" / "experiments.py", "e = 2\n")):
        f.write_text(text)
        code_version.cache_clear()
        assert (code_version(False, str(tmp_path)), code_version(True, str(tmp_path))) == (v0, a0), f
    (pkg / "analysis" / "a.py").write_text("a = 2\n")
    code_version.cache_clear()
    assert code_version(False, str(tmp_path)) == v0 and code_version(True, str(tmp_path)) != a0
    for f in (pkg / "nodes" / "n.py", pkg / "topology.py"):
        f.write_text(f.read_text() + "# changed\n")
        code_version.cache_clear()
        assert code_version(False, str(tmp_path)) != v0, f
        v0 = code_version(False, str(tmp_path))
    code_version.cache_clear()
