"""What the SSH forward costs a control call: direct TCP vs a direct-tcpip channel.

    .venv/bin/python benchmarks/bench_control_tunnel.py [--calls 2000]

Remote control ports listen on their host's loopback and the controller reaches them through
a ``direct-tcpip`` channel of an SSH connection to the host (testbed/providers/tunnel.py). Here
both ends are on this machine: a private sshd on a loopback port (root; its own host and client
keys, as in tests/integration/test_docker_ssh_engine.py) and one echo node on loopback. Per path:
the time to open a control connection (the SSH connection itself once, then a channel and the
node's challenge), and p50/p99 of ``ping`` and of a ``stall``/``unstall`` pair over ``--calls``
calls each, interleaved so load drifts hit both paths alike. Prints the numbers and writes
benchmarks/results/control_tunnel.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import pct  # noqa: E402
from testbed.nodes.runtime.control_client import ControlClient  # noqa: E402
from testbed.providers.tunnel import SSHTunnels  # noqa: E402
from testbed.testing import loopsshd  # noqa: E402
from testbed.testing.harness import NodeProc, make_configs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (a private sshd logging in as root)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tb-bench-tunnel-") as tmp:
        d = Path(tmp)
        sshd, port = loopsshd.start(d)
        os.environ["TESTBED_KNOWN_HOSTS"] = str(d / "known_hosts")
        cfg = make_configs(str(d / "node"), ["b1"])["b1"]
        node = NodeProc(cfg).start()
        tunnels = SSHTunnels()
        try:
            node.wait_ready()
            secret = bytes.fromhex(cfg["secret"])
            dest = (cfg["control"][0], int(cfg["control"][1]))
            target = {"kind": "docker", "address": "127.0.0.1", "port": port, "user": "root",
                      "key": str(d / "client")}
            t = time.perf_counter()
            tunnels._transport(target)
            ssh_connect_ms = (time.perf_counter() - t) * 1e3
            clients = {}
            open_ms = {}
            for path, conn in (("tcp", None), ("ssh", tunnels.connector(target, dest))):
                t = time.perf_counter()
                c = ControlClient(dest[0], dest[1], timeout=5.0, secret=secret, node="b1", connector=conn)
                c.call("ping")
                open_ms[path] = (time.perf_counter() - t) * 1e3
                clients[path] = c
            lat: dict[str, dict[str, list[float]]] = {p: {"ping": [], "stall+unstall": []} for p in clients}
            for _ in range(a.calls):
                for path, c in clients.items():
                    t = time.perf_counter()
                    c.call("ping")
                    lat[path]["ping"].append((time.perf_counter() - t) * 1e3)
                    t = time.perf_counter()
                    c.call("stall", peers=[])
                    c.call("unstall", peers=[])
                    lat[path]["stall+unstall"].append((time.perf_counter() - t) * 1e3)
            for c in clients.values():
                c.close()
        finally:
            tunnels.close()
            node.stop()
            sshd.terminate()
            sshd.wait(10)
    out = {"machine": platform.node(), "cpus": os.cpu_count(), "load_avg": os.getloadavg()[0],
           "calls": a.calls, "ssh_connect_ms": round(ssh_connect_ms, 2),
           "open_ms": {p: round(v, 2) for p, v in open_ms.items()},
           "latency_ms": {p: {op: {"p50": round(pct(xs, 50), 3), "p99": round(pct(xs, 99), 3)}
                              for op, xs in ops.items()} for p, ops in lat.items()}}
    print(f"SSH connection (once per host and controller process): {out['ssh_connect_ms']:.1f} ms")
    for p in ("tcp", "ssh"):
        print(f"{p:>4}: open {out['open_ms'][p]:.2f} ms; " + "; ".join(
            f"{op} p50 {v['p50']:.3f} ms p99 {v['p99']:.3f} ms" for op, v in out["latency_ms"][p].items()))
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    (res / "control_tunnel.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
