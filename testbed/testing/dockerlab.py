"""What the Docker tests look at on a real engine."""

from __future__ import annotations


def labeled(engine, run_id: str) -> list[str]:
    """The containers, networks and volumes of one run (label ``testbed.run``): what a test
    expects gone after ``down``, without looking at anybody else's."""
    f = {"label": f"testbed.run={run_id}"}
    return ([c.name for c in engine.containers.list(all=True, filters=f)]
            + [n.name for n in engine.networks.list(filters=f)]
            + [v.name for v in engine.volumes.list(filters=f)])
