"""The transactions protocol: multi-client transactions D-TX, D-TXNI, S-TX, BL-WAIT (Jergler et al.).

Its parts (found by :mod:`testbed.registry`): ``topology``, ``nodes`` (+ ``nodes.events``),
``analysis``, ``experiments``, ``topologies/``. Import nothing here: node processes pass through
this package with the standard library and msgpack only.
"""
