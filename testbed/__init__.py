"""testbed: a declarative testbed for publish/subscribe protocol research.

Keep this module import-free: node processes import ``testbed.nodes`` and must
not pay for the controller's dependencies.
"""

__version__ = "0.1.0"
