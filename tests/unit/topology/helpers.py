"""A small valid pubsub topology to mutate in tests, and a loader for text."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import TopologyError
from testbed.topology.loader import load

BASE = """\
version: 1
name: t
protocol: pubsub
duration: 20s
seed: 3
sites:
  ny: {}
  rome: {}
nodes:
  b1: {role: broker, site: ny}
  b2: {role: broker, site: ny, neighbors: [b1]}
  b3: {role: broker, site: rome, neighbors: [b1]}
clients:
  pubs: {role: publisher, count: 2, attach: b2, rate: 10/s, size: 100B}
  subs: {role: subscriber, count: 3, attach: [b3], filter: "[class,eq,'STOCK']"}
links:
  default: {delay: 1ms}
faults: []
"""


def write(tmp_path: Path, text: str, name: str = "t.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def errors(tmp_path: Path, text: str, **kw) -> list[str]:
    """The problem lines of an invalid file, with the path prefix removed."""
    p = write(tmp_path, text)
    with pytest.raises(TopologyError) as ei:
        load(p, **kw)
    prefix = f"{p}:"
    lines = str(ei.value).splitlines()
    assert all(line.startswith(prefix) for line in lines), lines
    return [line[len(prefix):] for line in lines]


def one_error(tmp_path: Path, text: str, **kw) -> str:
    errs = errors(tmp_path, text, **kw)
    assert len(errs) == 1, errs
    return errs[0]
