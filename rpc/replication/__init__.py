"""The gRPC adapter of ``twinlog.engine.replication``: the leader's ``twinlog.v1.Replication``
service over a broker, and the follower's fetchers, one thread per leader broker
(CLUSTER.md §3.3, §3.10)."""
