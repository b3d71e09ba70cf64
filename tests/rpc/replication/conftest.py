"""Tests of ``twinlog.rpc.replication``: the replica fetch's values through protobuf and back,
and a follower's fetchers against a leader's service behind a real gRPC server on loopback."""
