"""A copy beside its marks (docs/formats.md): a cluster leader appends a copy while its
MARK_APPLYING records replicate, instead of a fetch round after them, and no follower
ever holds a copy without its marks: the leader reads a partition's data log before its
journal log and withholds the data log's batches unless this round's journal answer
reaches the journal log's end as it was after that read; the follower appends the
journal answer first, and drops the data answer when it dropped the journal one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from broker_support import batch
from cluster_support import wait_for as wait_for_slowly
from replication_support import TOPIC, Cluster

from twinlog.engine.base.errors import DiskFullError
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.broker.broker import Broker
from twinlog.engine.replication.fetch_calls import FetchedPartition, LogKind, ReplicaFetch
from twinlog.journal import CopyState

NAME = str(TOPIC)


def wait_for(what: str, probe: object) -> None:
    wait_for_slowly(what, probe, timeout_s=10.0, poll_s=0.005)  # type: ignore[arg-type]


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=5000, replica_lag_time_max_ms=60_000)
    yield opened
    opened.close()


def _led_by_1_coordinated_by_3(cluster: Cluster) -> Broker:
    """Broker 1 leads TOPIC, broker 3 coordinates, every broker fetching: the coordinator."""
    cluster.roles(leader=1, epoch=1)
    coordinator = cluster.use_coordinator(3)
    cluster.start_pumping()
    return coordinator


def _journaled(
    cluster: Cluster, coordinator: Broker, transactional_id: str
) -> tuple[ProducerIdentity, int]:
    """A transaction of two records (t1, t2) journaled at TOPIC's leader, broker 1."""
    identity = coordinator.init_producer(transactional_id)
    transaction_id = coordinator.begin_transaction(
        identity.producer_id, identity.producer_generation
    )
    for sequence, value in enumerate([b"t1", b"t2"]):
        cluster.brokers[1].produce(
            TOPIC.topic,
            0,
            batch([value], identity, sequence=sequence, transaction_id=transaction_id),
            transaction_id=transaction_id,
        )
    return identity, transaction_id


def _wait_applied_everywhere(cluster: Cluster, transaction_id: int) -> None:
    wait_for(
        "the transaction to be APPLIED on every replica",
        lambda: all(
            (row := broker.journal.transaction(NAME, transaction_id)) is not None
            and row.state is CopyState.APPLIED
            for broker in cluster.brokers.values()
        ),
    )


def _copy_appended_unreplicated(cluster: Cluster) -> int:
    """Broker 1 leads TOPIC, broker 3 coordinates; a transaction of two records is
    journaled on every replica, then committed while no follower fetches TOPIC (the
    transaction journal still replicates): its id, once broker 1 appended the copy."""
    coordinator = _led_by_1_coordinated_by_3(cluster)
    identity, transaction_id = _journaled(cluster, coordinator, "beside")
    cluster.cut = {2, 3}  # TOPIC's followers stop fetching; the coordinator's log goes on
    coordinator.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation
    )
    wait_for("broker 1's copy", lambda: cluster.partition(1).log.log_end_offset == 2)
    cluster.stop_pumping()
    return transaction_id


def _request_of(
    follower: Broker, journal_from: int = 0, journal_bytes_max: int = 0
) -> ReplicaFetch:
    """The follower's fetch of TOPIC's two logs from broker 1; its journal log's from
    ``journal_from`` records before its end, ``journal_bytes_max`` (0: no cap)."""
    request = follower.replica_fetch_request(1, max_wait_ms=0)
    assert request is not None
    wanted = []
    for each in request.partitions:
        if tuple(each.topic_partition) != tuple(TOPIC):
            continue
        if each.log is LogKind.JOURNAL:
            each = replace(
                each, fetch_offset=each.fetch_offset - journal_from, max_bytes=journal_bytes_max
            )
        wanted.append(each)
    return replace(request, partitions=tuple(wanted))


def _by_log(answers: list[FetchedPartition]) -> dict[LogKind, FetchedPartition]:
    return {answer.log: answer for answer in answers}


def test_the_copy_is_appended_while_its_marks_replicate(cluster: Cluster) -> None:
    transaction_id = _copy_appended_unreplicated(cluster)
    leader = cluster.brokers[1]
    # The copy is in the leader's data log although no follower holds its MARK_APPLYING:
    # neither committed nor applied, and no reader sees the copy.
    assert leader.journal.high_watermark(NAME) < leader.journal.journal_log(NAME).log_end_offset
    record = leader.journal.transaction(NAME, transaction_id)
    assert record is not None and record.state is CopyState.OPEN
    assert cluster.partition(1).high_watermark.value == 0

    cluster.cut = set()
    cluster.start_pumping()
    _wait_applied_everywhere(cluster, transaction_id)
    for broker in cluster.brokers.values():
        assert cluster.values(broker) == [b"t1", b"t2"]


def test_a_leader_withholds_a_copy_whose_marks_its_journal_answer_does_not_reach(
    cluster: Cluster,
) -> None:
    _copy_appended_unreplicated(cluster)
    leader, follower = cluster.brokers[1], cluster.brokers[2]

    # The journal answer capped at one batch from one record back: short of the marks.
    short = _by_log(leader.replica_fetch(_request_of(follower, 1, journal_bytes_max=1)))
    assert short[LogKind.JOURNAL].records
    assert short[LogKind.DATA].records == b"", "a copy went without its marks"
    assert short[LogKind.DATA].log_end_offset == 2  # the answer stands, its batches withheld

    # No journal log in the fetch: nothing says the follower holds the marks.
    data_only = _request_of(follower)
    data_only = replace(
        data_only, partitions=tuple(p for p in data_only.partitions if p.log is LogKind.DATA)
    )
    assert leader.replica_fetch(data_only)[0].records == b""

    # The whole journal answer: the copy goes with it.
    whole = _by_log(leader.replica_fetch(_request_of(follower)))
    assert whole[LogKind.JOURNAL].records and whole[LogKind.DATA].records


def test_a_follower_appends_the_journal_answer_first_and_no_copy_without_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    _copy_appended_unreplicated(cluster)
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    journal_end = follower.journal.journal_log(NAME).log_end_offset

    # A journal answer from before the follower's end (an answer to an older fetch) is
    # dropped; the data answer beside it, whose marks it carried, is dropped too.
    stale = _by_log(leader.replica_fetch(_request_of(follower, 1)))
    assert stale[LogKind.JOURNAL].records and stale[LogKind.DATA].records
    follower.apply_replica_fetch(1, [stale[LogKind.DATA], stale[LogKind.JOURNAL]])
    assert follower.journal.journal_log(NAME).log_end_offset == journal_end
    assert follower.partition(TOPIC).log.log_end_offset == 0, "a copy without its marks"

    applied: list[LogKind] = []
    partition = follower.partition(TOPIC)
    apply_fetched = partition.apply_fetched

    def recorded(answer: FetchedPartition, leader_id: int) -> bool:
        applied.append(answer.log)
        return apply_fetched(answer, leader_id)

    monkeypatch.setattr(partition, "apply_fetched", recorded)
    whole = _by_log(leader.replica_fetch(_request_of(follower)))
    follower.apply_replica_fetch(1, [whole[LogKind.DATA], whole[LogKind.JOURNAL]])
    assert applied == [LogKind.JOURNAL, LogKind.DATA]
    assert follower.journal.journal_log(NAME).log_end_offset > journal_end
    assert partition.log.log_end_offset == 2


def test_a_copy_that_fails_beside_its_marks_is_recovered_and_copied_once(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data log refuses the copy (a full disk) after its marks went in: the marks
    still commit, the copier's next turn recovers the group (APPLYING, nothing copied)
    and the coordinator's retry finds it copied once, on every replica."""
    coordinator = _led_by_1_coordinated_by_3(cluster)
    leader = cluster.brokers[1]
    data_log = cluster.partition(1).log
    append_all = data_log.append_all_as_leader
    refused: list[int] = []

    def full_once(batches: object, **options: object) -> tuple[int, int]:
        if not refused:
            refused.append(leader.journal.journal_log(NAME).log_end_offset)
            raise DiskFullError(f"{data_log.directory}: no space left (a test's)")
        return append_all(batches, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(data_log, "append_all_as_leader", full_once)
    identity, transaction_id = _journaled(cluster, coordinator, "refused")
    coordinator.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation
    )
    _wait_applied_everywhere(cluster, transaction_id)
    assert refused, "the copy was never refused"
    for broker in cluster.brokers.values():
        assert cluster.values(broker) == [b"t1", b"t2"]
