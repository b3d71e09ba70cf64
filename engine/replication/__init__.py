"""Replication, without a transport: what a partition leader and its followers decide
(CLUSTER.md §3.3, Kafka's ISR protocol with KIP-101/279/320/497).

    fetch_calls           the follower -> leader fetch, as plain values; ``LogKind``: a
                          partition's data log and journal log, fetched in one long poll
    divergence            where a follower's log parts from its leader's, by leader epoch
    replica_set           the leader's view of its replicas: progress, ISR proposals,
                          the high watermark of each log
    replication_settings  a cluster broker's settings (min in-sync replicas, lag, fsync)

It stands on ``engine.log`` (leader epochs) and serves ``engine.broker``, whose
partitions lead and follow with it, and ``rpc.replication``, which carries its values
over gRPC; who leads is decided in ZooKeeper, floors above. Nothing is imported here.
"""
