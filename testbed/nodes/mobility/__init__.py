"""Transactional mobility (Hu et al.): brokers with a mobile container, 3PC-style
reconfiguration movement and the traditional covering-based movement (docs/mobility.md)."""

NODE_CLASSES = {
    ("node", "broker"): "testbed.nodes.mobility.broker:MobilityBroker",
    ("clients", "*"): "testbed.nodes.pubsub.clients:ClientHost",  # stationary publishers/subscribers
}
