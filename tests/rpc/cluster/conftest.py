"""Tests of ``twinlog.rpc.cluster``: the leader locator against a real ZooKeeper (slow) and
small fakes of it."""
