"""`testbed reproduce` arguments: the paper choices come from testbed.experiments; bad input is one line."""

import pytest

from testbed import cli


def test_reproduce_choices_and_usage_errors(capsys):
    p = cli._parser()
    a = p.parse_args(["reproduce", "all", "--scale", "quick", "--points", "rate=500", "--out", "x"])
    assert (a.protocol, a.scale, a.points, a.out) == (["all"], "quick", "rate=500", "x")
    assert p.parse_args(["reproduce", "mobility", "transactions", "--cpu-budget", "1.5"]).protocol == ["mobility",
                                                                                                      "transactions"]
    assert p.parse_args(["reproduce", "gryphon", "--fig", "6", "--fig", "7"]).fig == [6, 7]
    with pytest.raises(SystemExit):
        p.parse_args(["reproduce", "nope"])
    from testbed.experiments import paper_names

    assert {"gryphon", "mobility", "ordering"} <= set(paper_names())
    assert "all|" + "|".join(paper_names()) in capsys.readouterr().err  # every paper, found by the registry
    assert cli.main(["reproduce", "all", "--fig", "7"]) == 2
    assert "--fig selects figures of one paper" in capsys.readouterr().err
    assert cli.main(["reproduce", "ordering", "--fig", "99"]) == 2
    assert "ordering has figures [7, 8, 9, 10, 11, 12, 13, 14], not [99]" in capsys.readouterr().err
    assert cli.main(["reproduce", "ordering", "--points", "rate"]) == 2
    assert "expected key=value" in capsys.readouterr().err
    assert cli.main(["reproduce", "all", "ordering"]) == 2
    assert "`all` alone" in capsys.readouterr().err
    assert cli.main(["reproduce", "ordering", "mobility", "--fig", "7"]) == 2
    assert "not with several" in capsys.readouterr().err
    assert cli.main(["reproduce", "ordering", "--cpu-budget", "0"]) == 2
    assert "--cpu-budget 0.0: more than 0 cores" in capsys.readouterr().err


def test_reproduce_help_names_where_papers_live(capsys):
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["reproduce", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "testbed/protocols/<p>/experiments.py" in out and "testbed/experiments/<name>.py" not in out
