"""Fingerprint the Fig 1b scenario on the deterministic in-memory runtime: every message sent
(source, destination, content) and every logged event, hashed, per variant and setting (18), with
the message and transaction counts. A tool, not a test: run it from two checkouts and compare::

    cd CHECKOUT && PYTHONHASHSEED=0 PYTHONPATH=$PWD python tests/unit/transactions/fingerprint.py OUT.json

(``PYTHONHASHSEED`` fixed: the S-TX conflict setting's order depends on set iteration.)"""
import collections, hashlib, json, sys
from tests.unit.pubsub import harness as H
from tests.unit.transactions.harness import run, run_with_crash

orig = H.Sim._send
def _send(self, src, dst, msg):
    self.trace.append((src, dst, msg.get("k"), json.dumps(msg, sort_keys=True, default=repr)))
    return orig(self, src, dst, msg)
H.Sim._send = _send
H.Sim.trace = None
_init = H.Sim.__init__
def __init__(self, *a, **k):
    _init(self, *a, **k); self.trace = []
H.Sim.__init__ = __init__

out = {}
for v in ("dtx", "dtxni", "stx", "blwait"):
    for label, kw in (("plain", {}), ("abort3", {"abort_every": 3}), ("conflict", {"conflict": True}),
                      ("2thr", {"threads": 2}), ("crash", None)):
        if label == "conflict" and v == "blwait":
            continue
        if label == "crash":
            if v == "blwait":
                continue
            sim = run_with_crash(v, transactions=10)
        else:
            sim = run(v, seconds=8, transactions=10, **kw)
        ends = [r for r in sim.logs if r["ev"] == "tx_end"]
        nd = sum(1 for r in ends if r.get("outcome") == "committed")
        kinds = collections.Counter(k for _, _, k, _ in sim.trace)
        h1 = hashlib.sha256(json.dumps(sim.trace).encode()).hexdigest()[:12]
        h2 = hashlib.sha256(json.dumps(sim.logs, sort_keys=True).encode()).hexdigest()[:12]
        txmsgs = sum(c for k, c in kinds.items() if k and k.startswith(("tx", "join")))
        out[f"{v}/{label}"] = {"tx": len(ends), "committed": nd, "msgs": len(sim.trace),
                               "tx_msgs_per_tx": round(txmsgs / max(1, len(ends)), 2),
                               "trace": h1, "logs": h2}
        print(v, label, out[f"{v}/{label}"], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
