"""The mobility protocol: transactional client mobility (Hu et al.).

Its parts (found by :mod:`testbed.registry`): ``topology``, ``nodes`` (+ ``nodes.events``),
``analysis``, ``experiments``, ``topologies/``. Import nothing here: node processes pass through
this package with the standard library and msgpack only.
"""
