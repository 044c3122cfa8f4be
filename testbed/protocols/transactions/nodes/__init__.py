"""Multi-client transactions (Jergler et al.): D-TX, D-TXNI, S-TX brokers on the pub/sub core,
the client TXManager and the instance-dispatching scenario (E, D, A1/A2), BL-WAIT.

One broker class per variant; ``TxBroker`` picks it from ``params.variant``
(BL-WAIT runs the plain pub/sub broker). See docs/transactions.md.
"""

NODE_CLASSES = {
    ("node", "broker"): "testbed.protocols.transactions.nodes.broker:TxBroker",
    ("clients", "*"): "testbed.protocols.transactions.nodes.clients:ScenarioHost",
}
