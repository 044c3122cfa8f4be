"""The echo protocol: the runtime's own small test protocol (a node echoes frames back).

Its parts (found by :mod:`testbed.registry`): ``topology``, ``nodes`` (+ ``nodes.events``),
``analysis``, ``topologies/``. Import nothing here: node processes pass through
this package with the standard library and msgpack only.
"""
