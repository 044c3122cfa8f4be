"""Content-based pub/sub core (PADRES model): SRT/PRT routing, covering, clients."""

NODE_CLASSES = {
    ("node", "broker"): "testbed.nodes.pubsub.broker:Broker",
    ("clients", "*"): "testbed.nodes.pubsub.clients:ClientHost",
}
