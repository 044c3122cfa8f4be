"""The pubsub protocol: the content-based publish/subscribe core (PADRES model) the other protocols build on.

Its parts (found by :mod:`testbed.registry`): ``topology``, ``nodes`` (+ ``nodes.events``),
``analysis``. Import nothing here: node processes pass through
this package with the standard library and msgpack only.
"""
