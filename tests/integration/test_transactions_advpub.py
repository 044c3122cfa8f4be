"""Transactional adv/uadv through the TXManager library (``params.scenario: advpub``) on real
processes, on randomly generated broker trees no example uses (seeded: the shapes are the same
in every run of the test), for D-TX, D-TXNI and S-TX, checked by the batched Spark checks
(P1-P7, P9) on the logged histories.

Per variant two trees of 4-6 brokers (each broker's parent drawn among the earlier ones), C2 and
C1 on random brokers (possibly the same one), 6 transactions, every third aborted: C1's sub held
at its broker until C2's txAdv releases it (a broker-issued sub, Alg 2), C2's publication
delivered to C1 on commit, a txUadv in the even ones withdrawing what the adv released.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from testbed import api

VARIANTS = ("dtx", "dtxni", "stx")
SEEDS = (11, 23)
TXS = 6


def random_tree(seed: int) -> tuple[dict[str, str | None], str, str]:
    rng = random.Random(seed)
    n = rng.randint(4, 6)
    parent: dict[str, str | None] = {"b1": None}
    for i in range(2, n + 1):
        parent[f"b{i}"] = f"b{rng.randint(1, i - 1)}"
    names = list(parent)
    return parent, rng.choice(names), rng.choice(names)


def topology(variant: str, seed: int) -> str:
    parent, c2, c1 = random_tree(seed)
    nodes = "\n".join(f"  {b}: {{role: broker, site: lab{', neighbors: [' + p + ']' if p else ''}}}"
                      for b, p in parent.items())
    return f"""version: 1
name: tx-advpub-{variant}-{seed}
protocol: transactions
duration: 25s
seed: {seed}
sites: {{lab: {{}}}}
nodes:
{nodes}
clients:
  c2: {{role: coordinator, attach: {c2}}}
  c1: {{role: agent, attach: {c1}}}
links:
  default: {{delay: 2ms, jitter: 1ms}}
  clients: {{delay: 2ms, jitter: 1ms}}
params:
  variant: {variant}
  scenario: advpub
  transactions: {TXS}
  abort_every: 3
  timeout: 3s
  settle: 1s
"""


def events(run: str, ev: str) -> list[dict]:
    out = []
    for f in sorted((Path(run) / "logs").glob("*.jsonl")):
        out += [json.loads(line) for line in f.read_text().splitlines() if f'"ev":"{ev}"' in line]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {}, root


def run_of(runs, variant: str, seed: int) -> str:
    done, root = runs
    if (variant, seed) not in done:
        topo = root / f"advpub-{variant}-{seed}.yaml"
        topo.write_text(topology(variant, seed))
        [rd] = api.run(str(topo), runs_dir=str(root / "runs"), analyze=False)
        done[(variant, seed)] = str(rd.path)
    return done[(variant, seed)]


def test_the_random_trees_are_trees_of_several_shapes():
    shapes = {tuple(random_tree(s)[0].values()) for s in SEEDS}
    assert len(shapes) == len(SEEDS) and all(len(random_tree(s)[0]) >= 4 for s in SEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_advpub_on_random_trees_commits_delivers_and_aborts_on_real_processes(runs, variant):
    for seed in SEEDS:
        run = run_of(runs, variant, seed)
        why = (variant, seed, random_tree(seed), events(run, "node_error"), events(run, "broker_bad_message"))
        m = json.loads((Path(run) / "manifest.json").read_text())
        assert m.get("ended") == "finished", why  # the run ended when its transactions were done
        ends = {e["tx"]: e["outcome"] for e in events(run, "tx_end")}
        assert ends == {f"c2-0.0:{n}": ("aborted" if n % 3 == 0 else "committed") for n in range(1, TXS + 1)}, why
        delivered = sorted(e["tx"] for e in events(run, "tx_deliver") if e["n"] == 4)
        assert delivered == sorted(t for t, o in ends.items() if o == "committed"), why
        assert all(e["client"] == "c1-0" for e in events(run, "tx_deliver") if e["n"] == 4)
        assert not events(run, "node_error") and not events(run, "broker_bad_message"), why
        parent, c2, c1 = random_tree(seed)
        released = [e for e in events(run, "tx_op") if e["client"].startswith("b") and e["kind"] == "sub"]
        if c1 != c2:  # C1's sub was held at its broker and released there by C2's adv
            assert {e["client"] for e in released} == {c1} and len(released) == TXS, why


@pytest.mark.slow
@pytest.mark.spark
def test_the_spark_checks_pass_on_every_advpub_run(runs):
    from testbed.analysis.session import spark_session
    from testbed.protocols.transactions.analysis.batch import check_runs

    paths = {f"{v}-{s}": run_of(runs, v, s) for v in VARIANTS for s in SEEDS}
    res = check_runs(spark_session(), paths)
    for key, checks in res.items():
        by = {c["check"]: c for c in checks}
        bad = {k: c["examples"] for k, c in by.items() if not c["passed"]}
        assert bad == {}, (key, bad)
        for name in ("transactions.p1_order", "transactions.p2_routing", "transactions.p5_tables"):
            assert by[name]["applies"], (key, name)
