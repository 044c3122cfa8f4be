"""Node classes of the forgetful variant: its broker, and the pub/sub core's client host."""

NODE_CLASSES = {
    ("node", "broker"): "testbed.testing.forgetful.nodes.broker:ForgetfulBroker",
    ("clients", "*"): "testbed.protocols.pubsub.nodes.clients:ClientHost",
}
