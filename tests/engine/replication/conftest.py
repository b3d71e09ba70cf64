"""Tests of ``twinlog.engine.replication``: divergence by epoch, the leader's replica set,
and replicas of real logs kept in step without a transport."""
