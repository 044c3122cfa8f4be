"""Clock-offset estimation between the controller and each host (Cristian's algorithm).

For each host, several ``clock`` round trips over one node's control channel;
the sample with the smallest round-trip time wins: offset = remote wall time -
midpoint of the controller's send and receive wall times, uncertainty = half
that round trip. ``corrected_t = t_remote - offset`` maps a host's timestamps
onto the controller's clock.
"""

from __future__ import annotations

import time
from typing import Any, Callable


def estimate_offset(clock_call: Callable[[], int], samples: int = 8) -> dict[str, Any]:
    """``clock_call()`` returns the remote wall clock in ns. Returns offset and uncertainty in ns."""
    best: tuple[int, int] | None = None  # (rtt, offset)
    for _ in range(samples):
        t1 = time.time_ns()
        remote = clock_call()
        t2 = time.time_ns()
        rtt = t2 - t1
        offset = remote - (t1 + t2) // 2
        if best is None or rtt < best[0]:
            best = (rtt, offset)
    assert best is not None
    return {"offset_ns": best[1], "uncertainty_ns": best[0] // 2 + 1, "rtt_ns": best[0], "samples": samples}


def estimate_offsets(deployment, controls, samples: int = 8) -> dict[str, dict[str, Any]]:
    """One estimate per host of the deployment, through the first node on each host."""
    by_host: dict[str, str] = {}
    for n, ep in deployment.endpoints.items():
        by_host.setdefault(ep.host, n)
    out = {}
    for host, node in sorted(by_host.items()):
        out[host] = estimate_offset(lambda: int(controls.call(node, "clock")["wall_ns"]), samples)
        out[host]["via"] = node
    return out
