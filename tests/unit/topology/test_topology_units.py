import math

import pytest

from testbed.topology.units import (
    format_link_rate, format_time, parse_link_rate, parse_loss, parse_rate, parse_size, parse_time,
)


@pytest.mark.parametrize("text,seconds", [
    ("250us", 250e-6), ("0.5ms", 0.0005), ("2s", 2.0), ("1m", 60.0), ("1.5 s", 1.5), ("0s", 0.0),
])
def test_times(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)


def test_inf_only_where_allowed():
    assert parse_time("inf", allow_inf=True) == math.inf
    with pytest.raises(ValueError, match="inf is not allowed"):
        parse_time("inf")


@pytest.mark.parametrize("value", [5, 2.5, "5", " 7 "])
def test_bare_number_is_an_error_naming_the_units(value):
    with pytest.raises(ValueError, match=r"bare number is not a time: write it with a unit \(us, ms, s, m\)"):
        parse_time(value)


@pytest.mark.parametrize("bad", ["5h", "ms", "-1s", "1 sec", True, None, [1]])
def test_bad_times(bad):
    with pytest.raises(ValueError):
        parse_time(bad)


def test_sizes_rates_links_loss():
    assert parse_size("100B") == 100
    assert parse_size("4KB") == 4096
    assert parse_size("1MB") == 1024 * 1024
    assert parse_rate("25/s") == 25.0
    assert parse_rate("2.5 / s") == 2.5
    assert parse_link_rate("512kbit") == 512_000
    assert parse_link_rate("100mbit") == 100_000_000
    assert parse_link_rate("1gbit") == 10**9
    assert parse_loss("0.1%") == pytest.approx(0.001)
    assert parse_loss("100%") == 1.0


@pytest.mark.parametrize("fn,bad,msg", [
    (parse_size, "100", r"\(B, KB, MB\)"),
    (parse_size, "1.5B", "whole number of bytes"),
    (parse_size, "10GB", "not a size"),
    (parse_rate, 25, r"\(N/s\)"),
    (parse_rate, "0/s", "must be positive"),
    (parse_rate, "25/m", "write it as N/s"),
    (parse_link_rate, "100mbps", "kbit, mbit, gbit"),
    (parse_link_rate, 100, "kbit, mbit, gbit"),
    (parse_loss, "120%", "between 0% and 100%"),
    (parse_loss, 0.1, r"\(%\)"),
])
def test_unit_errors(fn, bad, msg):
    with pytest.raises(ValueError, match=msg):
        fn(bad)


def test_formatting():
    assert format_time(0.0025) == "2.5ms"
    assert format_time(120) == "2m"
    assert format_time(10.5) == "10.5s"
    assert format_time(5e-5) == "50us"
    assert format_link_rate(100_000_000) == "100mbit"
    assert format_link_rate(None) == "unlimited"


def test_names_and_units_refuse_a_trailing_newline():
    """``re.match`` with ``$`` lets "b1\\n" through; names are matched in full (issue #32)."""
    import pytest

    from testbed import registry
    from testbed.topology import schema, units

    assert schema._check_name("b1") == "b1"
    for bad in ("b1\n", "b1\n\n", "B1", "b1 "):
        with pytest.raises(ValueError, match="not a valid name"):
            schema._check_name(bad)
    assert not registry.NAME_RE.fullmatch("pubsub\n")
    assert units.parse_time(" 10ms\n") == 0.01  # units strip surrounding blanks on purpose
    with pytest.raises(ValueError):
        units.parse_time("10ms\nx")
