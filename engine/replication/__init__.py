"""Replication, without a transport: what a partition leader and its followers decide
(CLUSTER.md §3.3, Kafka's ISR protocol with KIP-101/279/320/497).

    fetch_calls   the follower -> leader fetch, as plain values (a gRPC service carries them)
    divergence    where a follower's log parts from its leader's, by leader epoch
    replica_set   the leader's view of its replicas: progress, ISR proposals, high watermark

The broker's partitions use these; the transport (gRPC) and who leads (ZooKeeper) are
floors above. Nothing is imported here.
"""
