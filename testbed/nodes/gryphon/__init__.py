"""Gryphon guaranteed (exactly-once) delivery, Bhola et al.: pubends, subends,
knowledge/curiosity streams, cells and link bundles."""

NODE_CLASSES = {
    ("node", "broker"): "testbed.nodes.gryphon.broker:GryphonBroker",
    ("clients", "*"): "testbed.nodes.gryphon.clients:ClientHost",
}
