"""The built-in protocols, one package each, in the shape an external protocol package has.

``testbed/protocols/<p>/`` holds everything of protocol ``p``: ``topology.py`` (its topology
keys), ``nodes/`` (the node classes and ``events.py``: stdlib + msgpack only, shipped to hosts),
``analysis/`` (checks, figures, the predictor), ``experiments.py`` (the paper's figures and claims)
and ``topologies/`` (its topology files). The registry (:mod:`testbed.registry`) finds each
package here exactly as it finds an external one through the ``testbed.protocols`` entry points.

Nothing here may be imported at package level: a node process imports this package on its way
to ``<p>.nodes``, with the standard library and msgpack only.
"""
