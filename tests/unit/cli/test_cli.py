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
