"""The broker-to-broker services over gRPC (CLUSTER.md §3.3, §3.6, §3.10).

    Replication    ``twinlog.engine.replication``'s fetch: the leader's service
                   (``service``) and the follower's fetchers, one thread per leader broker
                   (``fetcher``, ``leader_fetcher``); docs/replication.md
    Coordination   the coordinator <-> partition calls of
                   ``twinlog.engine.transactions.partition_calls``: the calling side
                   (``coordination_client``), the serving side (``coordination_service``)
                   and where each target is (``coordination_locator``); docs/seam.md
    who may call   mutual TLS with the cluster CA (``broker_identity``, ``channel``), and
                   every call held against ZooKeeper (``internal_guard``,
                   ``internal_checks``)

It stands on the broker, ``engine.zookeeper`` and ``rpc.wire``, and serves ``rpc.server``,
whose cluster member and inter-broker listener plug it into a running broker.
"""
