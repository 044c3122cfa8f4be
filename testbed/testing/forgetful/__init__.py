"""``forgetful``: a deliberately broken pub/sub variant, for the tests of ``testbed explore`` only.

Its broker is the PADRES broker of ``testbed.protocols.pubsub.nodes`` except that it never re-syncs a
neighbour that comes back (``on_peer_up`` sends nothing). A restarted broker starts with empty
routing tables, as every broker does, and its neighbours do not send it what it needs: it
re-learns only what its own clients re-issue, so publications routed through it are lost for
the rest of the run. The pub/sub core's completeness check sees it after any crash + restart of
a broker that routes publications to subscribers beyond it.

It is registered only where a test installs its entry point (:func:`install_entry_point`: a
``*.dist-info`` directory with ``entry_points.txt`` on ``sys.path`` / ``PYTHONPATH``, which is
how ``importlib.metadata`` finds installed distributions), never among the built-ins.
"""

from __future__ import annotations

from pathlib import Path

NAME = "forgetful"
TOPOLOGY = "testbed.testing.forgetful.topology"
NODES = "testbed.testing.forgetful.nodes"
EVENTS = "testbed.testing.forgetful.nodes.events"
ANALYSIS = "testbed.testing.forgetful.analysis"


def install_entry_point(site_dir: str | Path) -> Path:
    """Write a minimal distribution's metadata declaring the ``testbed.protocols`` entry point
    ``forgetful`` into ``site_dir``; put ``site_dir`` on ``sys.path`` (and ``PYTHONPATH`` for the
    subprocesses) and call ``testbed.registry.reset()`` to see it. -> the dist-info directory."""
    d = Path(site_dir) / "testbed_forgetful-0.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: testbed-forgetful\nVersion: 0\n")
    (d / "entry_points.txt").write_text(f"[testbed.protocols]\n{NAME} = testbed.testing.forgetful\n")
    return d
