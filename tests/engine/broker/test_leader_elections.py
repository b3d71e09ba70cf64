"""Preferred leader elections on one node: every partition is led by its one replica
already, an unknown one says so, and no election may wait beyond the broker's bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.leader_elections import ELECT_TIMEOUT_MS_MAX, ElectionOutcome


def test_one_node_needs_no_election_and_bounds_the_wait(tmp_path: Path) -> None:
    with Broker.open(tmp_path, journal_partitions=1, offsets_partitions=1) as broker:
        broker.create_topic("orders", 2)
        asked = [TopicPartition("orders", 1), TopicPartition("orders", 5)]
        results = broker.elect_preferred_leaders(asked, timeout_ms=1_000)
        assert [r.outcome for r in results] == [
            ElectionOutcome.NOT_NEEDED,
            ElectionOutcome.UNKNOWN_PARTITION,
        ]
        every = broker.elect_preferred_leaders(None, timeout_ms=1_000)
        assert {(r.topic, r.partition) for r in every} >= {("orders", 0), ("__txn_journal", 0)}
        for timeout_ms in (0, -1, ELECT_TIMEOUT_MS_MAX + 1):
            with pytest.raises(InvalidConfigError, match="timeout_ms"):
                broker.elect_preferred_leaders(asked, timeout_ms=timeout_ms)
