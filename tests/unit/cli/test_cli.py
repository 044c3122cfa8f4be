"""The CLI's own behaviour: flags that change the library's environment, exit codes."""

from pathlib import Path

from testbed import cli
from testbed.providers import engine

SMOKE = str(Path(__file__).resolve().parents[3] / "topologies" / "smoke.yaml")


def test_accept_unknown_host_keys_flag_opts_in(monkeypatch, capsys):
    monkeypatch.delenv(engine.ACCEPT_ENV, raising=False)
    assert engine.accept_unknown_hosts(None) is False
    assert cli.main(["validate", SMOKE, "--accept-unknown-host-keys"]) == 0
    assert engine.accept_unknown_hosts(None) is True


def test_without_the_flag_unknown_keys_stay_refused(monkeypatch, capsys):
    monkeypatch.delenv(engine.ACCEPT_ENV, raising=False)
    assert cli.main(["validate", SMOKE]) == 0
    assert engine.accept_unknown_hosts(None) is False


def test_bad_usage_is_one_line_exit_2(tmp_path, capsys):
    assert cli.main(["validate", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file" in err[0]


def test_an_unexpected_failure_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    import pytest

    from testbed import api

    def boom(*a, **k):
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(api, "validate", boom)
    assert cli.main(["validate", SMOKE]) == 70
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "RuntimeError: disk on fire" in err[0] and "--debug" in err[0]
    with pytest.raises(RuntimeError):
        cli.main(["--debug", "validate", SMOKE])


def test_graph_writes_a_png_svg_or_dot_and_prints_the_path(tmp_path, capsys):
    for ext, magic in (("png", b"\x89PNG"), ("svg", b"<?xml"), ("dot", b'graph "smoke"')):
        out = tmp_path / f"smoke.{ext}"
        assert cli.main(["graph", SMOKE, "-o", str(out), "--at", "12.5s"]) == 0
        assert out.read_bytes().startswith(magic)
        assert capsys.readouterr().out.strip() == str(out)
    assert b"(crashed)" in (tmp_path / "smoke.svg").read_bytes()  # b3 at 12.5 s, laid out by dot


def test_graph_dash_prints_dot_and_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert cli.main(["graph", SMOKE, "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('graph "smoke" {') and out.rstrip().endswith("}")
    assert cli.main(["graph", SMOKE, "-o", str(tmp_path / "x.jpg")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ".png, .svg, .pdf or .dot" in err[0]
    assert cli.main(["graph", SMOKE, "-o", "-", "--at", "soon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--at 'soon'" in err[0]


def _strict_loads(text: str):
    """json.loads that refuses NaN/Infinity (what jq and other languages refuse)."""
    import json

    def no_constants(c):
        raise ValueError(f"non-standard JSON constant {c}")

    return json.loads(text, parse_constant=no_constants)


def test_validate_json_is_the_resolved_plan(capsys):
    from testbed.topology.loader import plans
    from testbed.topology.plan import Plan

    assert cli.main(["validate", SMOKE, "--json"]) == 0
    doc = _strict_loads(capsys.readouterr().out)
    assert doc["schema"] == 1 and doc["command"] == "validate" and doc["file"] == SMOKE and doc["runs"] == 1
    (p,) = doc["plans"]
    assert Plan.from_dict(p) == plans(SMOKE, {}, None)[0]  # lossless: the same plan as `testbed run` uses
    assert [a["op"] for a in p["actions"]][:2] == ["stall", "unstall"]
    assert p["links"]["b1->b5"]["delay_ms"] == 40.0


def test_validate_json_is_strict_json_even_with_infinite_params(capsys):
    gryphon = str(Path(SMOKE).parent / "gryphon" / "smoke.yaml")
    assert cli.main(["validate", gryphon, "--json"]) == 0
    doc = _strict_loads(capsys.readouterr().out)
    assert doc["plans"][0]["params"]["dct"] == "inf"


def test_validate_json_lists_every_point_of_a_sweep(tmp_path, capsys):
    text = Path(SMOKE).read_text().replace("seed: 1\n", "seed: 1\nsweep: {rate: [10, 20]}\nrepeat: 2\n", 1)
    text = text.replace("rate: 20/s", "rate: '{{ rate }}/s'")
    f = tmp_path / "sweep.yaml"
    f.write_text(text)
    assert cli.main(["validate", str(f), "--json"]) == 0
    doc = _strict_loads(capsys.readouterr().out)
    assert doc["runs"] == 4 == len(doc["plans"])
    assert sorted((p["point"]["rate"], p["repeat_index"]) for p in doc["plans"]) == [(10, 0), (10, 1), (20, 0), (20, 1)]


def test_strict_json_conversion():
    import math

    from testbed.jsonout import dumps

    assert _strict_loads(dumps({"a": math.inf, "b": -math.inf, "c": math.nan, "d": (1, 2.5), "e": Path("/x")})) == \
        {"a": "inf", "b": "-inf", "c": None, "d": [1, 2.5], "e": "/x"}
