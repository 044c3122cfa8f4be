"""Topology templates run sandboxed (issue #32, attack 4): a template cannot run code."""

from __future__ import annotations

import pytest

from testbed.errors import TopologyError
from testbed.topology.template import render_text


@pytest.mark.parametrize("expr", [
    'cycler.__init__.__globals__.os.popen("touch {marker}").read()',
    'joiner.__init__.__globals__["os"].system("touch {marker}")',
    '"".__class__.__mro__[1].__subclasses__()',
    'lipsum.__globals__["os"].popen("touch {marker}")',
])
def test_a_template_that_reaches_for_os_is_refused_with_its_line(tmp_path, expr):
    marker = tmp_path / "pwned"
    path = tmp_path / "t.yaml"
    path.write_text("version: 1\nname: x\n{{ " + expr.format(marker=marker) + " }}\n")
    with pytest.raises(TopologyError) as ei:
        render_text(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}:3:") and "refused by the template sandbox" in msg, msg
    assert len(msg.splitlines()) == 1
    assert not marker.exists()


def test_a_template_may_not_change_values_or_read_outside_its_directory(tmp_path):
    (tmp_path / "secret.txt").write_text("s3cret")
    d = tmp_path / "topo"
    d.mkdir()
    path = d / "t.yaml"
    path.write_text("{% set l = [1] %}{{ l.append(2) }}\n")
    with pytest.raises(TopologyError, match="refused by the template sandbox"):
        render_text(path)
    path.write_text('x: 1\n{% include "../secret.txt" %}\n')
    with pytest.raises(TopologyError, match="template include not found"):
        render_text(path)


def test_what_a_template_may_still_do(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "n.yaml").write_text("  b{{ i }}: {role: broker}\n")
    path = tmp_path / "t.yaml"
    path.write_text("name: {{ name | upper }}\nnodes:\n{% for i in range(n) %}{% include 'parts/n.yaml' %}"
                    "{% endfor %}k: {{ {'a': 1}.items() | list }}\n")
    out = render_text(path, {"name": "x", "n": 2})
    assert out == "name: X\nnodes:\n  b0: {role: broker}\n  b1: {role: broker}\nk: [('a', 1)]\n"
