"""``echo``: the runtime's own test protocol (integration tests, link benchmark).

Every process is an :class:`EchoNode` whatever its kind and role.
"""

NODE_CLASSES = {
    ("node", "*"): "testbed.protocols.echo.nodes.node:EchoNode",
    ("clients", "*"): "testbed.protocols.echo.nodes.node:EchoNode",
}
