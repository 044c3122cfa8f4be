"""Notification ordering (Baldoni et al.): TM servers and client-side ordering modules.

The ENS underneath is the pub/sub core's broker in topic mode (``[topic,eq,N]``).
"""

NODE_CLASSES = {
    ("node", "broker"): "testbed.nodes.pubsub.broker:Broker",
    ("node", "tm-server"): "testbed.nodes.ordering.tm_server:TMServer",
    ("clients", "*"): "testbed.nodes.ordering.clients:OrderingClientHost",
}
