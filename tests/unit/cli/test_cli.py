"""The CLI's own behaviour: flags that change the library's environment, exit codes."""

from pathlib import Path

from testbed import cli
from testbed.providers.docker import engine

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
