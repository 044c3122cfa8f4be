"""Jinja2 rendering, --set variables, sweep grids and repeats."""

from __future__ import annotations

import pytest

from testbed.errors import TopologyError
from testbed.topology.loader import plans
from testbed.topology.loader import load, read_sweep, render_text, sweep_points

from .helpers import BASE, write

SWEPT = BASE.replace("rate: 10/s", 'rate: "{{ rate }}/s"').replace(
    "count: 3,", "count: {{ subs }},") + """\
sweep:
  rate: [10, 100]
  subs: [1, 2, 3]
repeat: 2
"""


def test_grid_in_file_order_times_repeat(tmp_path):
    ps = plans(write(tmp_path, SWEPT))
    assert len(ps) == 2 * 3 * 2
    assert [(p.point, p.repeat_index) for p in ps[:4]] == [
        ({"rate": 10, "subs": 1}, 0), ({"rate": 10, "subs": 1}, 1),
        ({"rate": 10, "subs": 2}, 0), ({"rate": 10, "subs": 2}, 1),
    ]
    assert ps[-1].point == {"rate": 100, "subs": 3}
    assert ps[-1].nodes["pubs"].clients.rate_per_s == 100.0
    assert ps[-1].nodes["subs"].clients.count == 3
    assert ps[0].nodes["subs"].clients.count == 1
    assert 'rate: "{{ rate }}/s"' in ps[0].source_text
    assert 'rate: "10/s"' in ps[0].rendered_text
    assert ps[0].node_seed("b1") != ps[1].node_seed("b1")  # repeats differ in per-node seeds


def test_set_var_pins_a_sweep_key_and_provider_override(tmp_path):
    ps = plans(write(tmp_path, SWEPT), {"rate": 50}, provider="docker")
    assert [p.point for p in ps[::2]] == [{"rate": 50, "subs": 1}, {"rate": 50, "subs": 2}, {"rate": 50, "subs": 3}]
    assert {p.provider for p in ps} == {"docker"}


def test_set_vars_render_and_loops(tmp_path):
    text = BASE.replace("name: t", "name: {{ prefix }}-t").replace(
        "  b3: {role: broker, site: rome, neighbors: [b1]}\n",
        "  b3: {role: broker, site: rome, neighbors: [b1]}\n"
        "{% for i in range(n) %}  x{{ i }}: {role: broker, site: rome, neighbors: [b3]}\n{% endfor %}")
    topo = load(write(tmp_path, text), set_vars={"prefix": "exp", "n": 3})
    assert topo.name == "exp-t"
    assert list(topo.nodes)[-3:] == ["x0", "x1", "x2"]
    # the first (lenient) rendering copes with loops over undefined variables
    assert read_sweep(write(tmp_path, text, "u.yaml")) == ({}, 1)


def test_undefined_variable_is_located(tmp_path):
    text = BASE.replace("rate: 10/s", 'rate: "{{ speed }}/s"')
    p = write(tmp_path, text)
    with pytest.raises(TopologyError) as ei:
        load(p)
    assert str(ei.value) == (f"{p}:14:59: template variable 'speed' is undefined "
                             "(define it with --set speed=... or in sweep)")


def test_template_syntax_error_is_located(tmp_path):
    p = write(tmp_path, BASE.replace("seed: 3", "seed: {{ 3 "))
    with pytest.raises(TopologyError, match=rf"^{p}:6:1: template syntax error: expected token 'end of print statement'"):
        render_text(p, {}, {})


def test_sweep_read_when_the_lenient_render_fails(tmp_path):
    # {{ 10 // rate }} with rate undefined cannot render even leniently: fall back to the sweep block
    text = BASE.replace("seed: 3", "seed: {{ 100 // rate }}") + "sweep:\n  rate: [1, 2]\n"
    p = write(tmp_path, text)
    assert read_sweep(p) == ({"rate": [1, 2]}, 1)
    assert [pl.seed for pl in plans(p)] == [100, 50]


@pytest.mark.parametrize("block,message", [
    ("sweep:\n  rate: []\n", "sweep.rate: expected a non-empty list of values"),
    ("sweep: [1, 2]\n", "sweep: expected a mapping of variable: [values]"),
    ("repeat: 0\n", "repeat: must be a whole number >= 1; got 0"),
])
def test_bad_sweep_blocks(tmp_path, block, message):
    p = write(tmp_path, BASE + block)
    with pytest.raises(TopologyError) as ei:
        plans(p)
    assert message in str(ei.value)


def test_sweep_points_helper():
    assert sweep_points({}) == [{}]
    assert sweep_points({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    assert sweep_points({"a": [1, 2]}, {"a": 7}) == [{"a": 7}]
