"""Notification ordering (Baldoni et al.): TM servers and client-side ordering modules.

The ENS underneath is the pub/sub core's broker in topic mode (``[topic,eq,N]``).
"""

NODE_CLASSES = {
    ("node", "broker"): "testbed.protocols.pubsub.nodes.broker:Broker",
    ("node", "tm-server"): "testbed.protocols.ordering.nodes.tm_server:TMServer",
    ("clients", "*"): "testbed.protocols.ordering.nodes.clients:OrderingClientHost",
}
