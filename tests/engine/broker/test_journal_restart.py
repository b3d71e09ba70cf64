"""A follower whose journal log ends below its leader's journal-log start (a new replica
of a long-lived partition, or one away while the leader deleted journal segments no
transaction needed): it restarts its journal log empty at that start, as Kafka's
follower restarts its log, and holds every transaction still open, whole."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_support import batch
from cluster_support import wait_for as wait_for_slowly
from replication_support import TOPIC, Cluster

from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.broker.broker import Broker
from twinlog.journal import CopyState
from twinlog.journal.journal_log import journal_log_config

NAME = str(TOPIC)
SMALL_SEGMENT_BYTES = 1024  # a few ENTRY records each: retention has whole segments to drop


def wait_for(what: str, probe: Callable[[], object]) -> None:
    wait_for_slowly(what, probe, timeout_s=10.0, poll_s=0.005)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=60_000)
    yield opened
    opened.close()


def _transaction(
    coordinator: Broker, leader: Broker, values: list[bytes], commit: bool = True
) -> tuple[ProducerIdentity, int]:
    identity = coordinator.init_producer(f"loader-{values[0].decode()}")
    transaction_id = coordinator.begin_transaction(
        identity.producer_id, identity.producer_generation
    )
    for sequence, value in enumerate(values):
        leader.produce(
            TOPIC.topic,
            0,
            batch([value], identity, sequence=sequence, transaction_id=transaction_id),
            transaction_id=transaction_id,
        )
    if commit:
        coordinator.commit_transaction(
            transaction_id, identity.producer_id, identity.producer_generation,
            wait_for_applied=True,
        )  # fmt: skip
    return identity, transaction_id


def test_a_follower_below_the_leaders_journal_start_restarts_there_and_keeps_what_is_open(
    cluster: Cluster,
) -> None:
    leader = cluster.brokers[1]
    journal_log = leader.journal.journal_log(NAME)
    journal_log.reconfigure(
        journal_log_config(journal_log.config.batch_bytes_max, SMALL_SEGMENT_BYTES)
    )
    cluster.cut = {3}  # away while the leader writes and deletes journal segments
    cluster.roles(leader=1, epoch=1, isr=(1, 2), to=(1, 2))
    coordinator = cluster.use_coordinator(2)
    cluster.start_pumping()
    for round_index in range(8):
        _transaction(
            coordinator, leader, [f"done{round_index}-{i}".encode() * 20 for i in range(3)]
        )
    identity, open_id = _transaction(
        coordinator, leader, [b"open-a" * 20, b"open-b" * 20], commit=False
    )
    assert leader.journal.apply_retention(NAME) > 0
    start = journal_log.log_start_offset
    open_record = leader.journal.transaction(NAME, open_id)
    assert start > 0 and open_record is not None and open_record.first_sequence >= start
    # Broker 3 comes back with an empty journal log, below the leader's start.
    cluster.cut = set()
    cluster.roles(leader=1, epoch=1, isr=(1, 2), to=(3,))
    follower_log = cluster.brokers[3].journal.journal_log(NAME)
    wait_for(
        "broker 3 to restart its journal log at the leader's start and catch up",
        lambda: (
            follower_log.log_start_offset == start
            and follower_log.log_end_offset == journal_log.log_end_offset
        ),
    )
    wait_for(
        "broker 3 to hold the open transaction, whole",
        lambda: (
            (r := cluster.brokers[3].journal.transaction(NAME, open_id)) is not None
            and r.entry_count == 2
        ),
    )
    # The open transaction commits with broker 3 a replica: its copy is everywhere.
    coordinator.commit_transaction(
        open_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    wait_for(
        "broker 3 to apply the commit",
        lambda: (
            (r := cluster.brokers[3].journal.transaction(NAME, open_id)) is not None
            and r.state is CopyState.APPLIED
        ),
    )
    wait_for("broker 3's data log to match", lambda: cluster.log_bytes(3) == cluster.log_bytes(1))
