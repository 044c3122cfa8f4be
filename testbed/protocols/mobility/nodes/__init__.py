"""Transactional mobility (Hu et al.): brokers with a mobile container, 3PC-style
reconfiguration movement and the traditional covering-based movement (docs/mobility.md)."""

NODE_CLASSES = {
    ("node", "broker"): "testbed.protocols.mobility.nodes.broker:MobilityBroker",
    ("clients", "*"): "testbed.protocols.pubsub.nodes.clients:ClientHost",  # stationary publishers/subscribers
}
