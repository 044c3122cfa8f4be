"""The ordering protocol: total notification order with topic managers (Baldoni et al.).

Its parts (found by :mod:`testbed.registry`): ``topology``, ``nodes`` (+ ``nodes.events``),
``analysis``, ``experiments``, ``topologies/``. Import nothing here: node processes pass through
this package with the standard library and msgpack only.
"""
