"""The gRPC server over an engine ``Broker``: services, authentication, ACLs, limits, and
what an operator watches (metrics, health, request and audit logs: docs/operations.md).

On a cluster it also joins the broker to ZooKeeper (``cluster_member``: registration,
controller, roles, fetchers, the seam's remote ends) and serves the inter-broker services
of ``rpc.replication`` (``inter_broker``). Above it, the Kafka listener uses its
authentication, ACLs and audit for its own door, and ``rpc.cli`` runs it (``twinlog
serve``). It never imports the client.
"""
