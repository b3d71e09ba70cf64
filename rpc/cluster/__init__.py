"""The cluster assembly: how a served broker joins its cluster, and its one view of it.

Owns: joining ZooKeeper (``joining``: the session, the broker opener on the cluster's
metadata and ids), the ZooKeeper member (``cluster_member``: registration, controller,
roles, fetchers, ISR writes; the ``engine.broker.membership.Membership`` of a cluster
broker), the answers to Metadata and FindCoordinator (``metadata_source``,
``coordinator_source``: a single node's, and a cluster's from ZooKeeper), and the leader
locator (``leader_locator``) whose cache the internal checks and the coordination
clients share.

Serves both front doors: the gRPC server (``rpc.server``) and the Kafka listener
(``rpc.kafka``) take the same metadata source and coordinator lookup. Below it:
``rpc.replication`` (the broker-to-broker services), ``rpc.wire``, the engine
(``engine.zookeeper`` for kazoo).
"""
