"""Gryphon guaranteed (exactly-once) delivery, Bhola et al.: pubends, subends,
knowledge/curiosity streams, cells and link bundles."""

NODE_CLASSES = {
    ("node", "broker"): "testbed.protocols.gryphon.nodes.broker:GryphonBroker",
    ("clients", "*"): "testbed.protocols.gryphon.nodes.clients:ClientHost",
}
