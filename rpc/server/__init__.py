"""The gRPC server over an engine ``Broker``: services, limits, and what an operator
watches (metrics, health, request logs: docs/operations.md). Who may call what is
``rpc.policy``'s, which the Kafka listener asks too.

On a cluster it serves the inter-broker services of ``rpc.replication`` (``inter_broker``)
for the member ``rpc.cluster`` joined to ZooKeeper. Above it, ``rpc.cli`` runs it (``twinlog
serve``). It never imports the client.
"""
