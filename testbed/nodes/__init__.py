"""Reference protocol nodes. Runs inside node processes/containers.

Imports nothing from the controller side (only the stdlib and msgpack).
Entry point: ``python -m testbed.nodes CONFIG.json``.
"""
