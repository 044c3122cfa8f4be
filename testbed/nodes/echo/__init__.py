"""``echo``: the runtime's own test protocol (integration tests, link benchmark).

Every process is an :class:`EchoNode` whatever its kind and role.
"""

NODE_CLASSES = {
    ("node", "*"): "testbed.nodes.echo.node:EchoNode",
    ("clients", "*"): "testbed.nodes.echo.node:EchoNode",
}
