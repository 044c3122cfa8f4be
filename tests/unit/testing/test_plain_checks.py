"""The plain-Python yardstick of the analysis benchmark: each of its four checks passes on a
clean synthetic run and fails on one where its property is false."""

from __future__ import annotations

import json

from testbed.testing.plain_checks import CHECKS, run_checks
from testbed.testing.synthetic import make_run_dir


def test_clean_run_passes_and_the_stall_is_attributed(tmp_path):
    syn = make_run_dir(tmp_path, duration_s=20.0, publishers=2, subscribers=2)
    r = run_checks(syn.path)
    assert all(r.passed(c) for c in CHECKS), r.violations
    assert r.attributed == syn.lost_in_fault > 0
    assert r.events == syn.events + 1 and r.bad_lines == 1  # + the undeclared event (JSON); the torn line


def test_duplicate_fails_no_duplicates(tmp_path):
    r = run_checks(make_run_dir(tmp_path, duplicate=True).path)
    assert r.violations["no_duplicates"] == 1
    assert r.passed("completeness") and r.passed("filter_match")


def test_lost_delivery_outside_faults_fails_completeness(tmp_path):
    r = run_checks(make_run_dir(tmp_path, lost=True).path)
    assert r.violations["completeness"] == 1 and r.passed("no_duplicates")


def _rewrite(path, fn):
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(fn(lines)))


def test_a_delivery_the_filter_does_not_match_fails_filter_match(tmp_path):
    syn = make_run_dir(tmp_path, torn=False, unknown_event=False)
    pubs = [json.loads(x) for x in (syn.path / "logs" / "pubs.jsonl").read_text().splitlines()]
    cheap = next(e for e in pubs if e["ev"] == "publish" and e["attrs"]["class"] == "STOCK"
                 and e["attrs"]["price"] < 50)  # locs-0 subscribed price >= 50

    def add(lines):
        d = json.loads(next(x for x in lines if '"deliver"' in x))
        d.update(pub_id=cheap["pub_id"], publisher=cheap["client"], seq=10**9)  # last in its FIFO too
        return lines + [json.dumps(d) + "\n"]
    _rewrite(syn.path / "logs" / "locs.jsonl", add)
    r = run_checks(syn.path)
    assert r.violations["filter_match"] == 1 and r.passed("fifo") and r.passed("no_duplicates")


def test_two_deliveries_swapped_fail_fifo(tmp_path):
    syn = make_run_dir(tmp_path, torn=False, unknown_event=False)

    def swap(lines):
        idx = [i for i, x in enumerate(lines) if '"deliver"' in x and '"client": "locs-0"' in x
               and '"publisher": "pubs-0"' in x]
        i, j = idx[0], idx[1]
        lines[i], lines[j] = lines[j], lines[i]
        return lines
    _rewrite(syn.path / "logs" / "locs.jsonl", swap)
    r = run_checks(syn.path)
    assert r.violations["fifo"] == 1
    assert all(r.passed(c) for c in CHECKS if c != "fifo")
