"""A copy still running on a leader that was deposed meanwhile appends nothing.

Found by the rolling-restart test (a duplicate: one transaction's records at offsets
11-13 and again at 14-16 of one partition, on every replica). The copier recorded
MARK_APPLYING, committed, and was about to append the copy when a controlled shutdown moved
leadership away. The new leader finished the copy (J6) and the old one, now its follower,
fetched it; then the old leader's copier appended the transaction's batches again behind
it. A follower's log stamps the newest epoch it fetched, so those batches carried the new
leader's epoch, and once the new leader's log had grown past them (the old one was down
for its restart) the epoch check (KIP-101) saw no divergence: the stale copy stayed, and
when the old leader led again it was on every replica. A log that follows now refuses a
leader's append (``DataLog.become_follower``), atomically with the step-down."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_support import batch
from cluster_support import wait_for as wait_for_slowly
from replication_support import TOPIC, Cluster

from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.journal import CopyState

NAME = str(TOPIC)


def wait_for(what: str, probe: Callable[[], object]) -> None:
    wait_for_slowly(what, probe, timeout_s=10.0, poll_s=0.005)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=60_000)
    yield opened
    opened.close()


def test_a_deposed_leaders_copy_in_flight_is_refused_not_appended_twice(
    cluster: Cluster,
) -> None:
    cluster.roles(leader=1, epoch=1)
    coordinator = cluster.use_coordinator(3)
    cluster.start_pumping()
    old_leader = cluster.brokers[1]
    old_leader.produce(TOPIC.topic, 0, batch([b"before"]))
    identity = coordinator.init_producer("copier")
    transaction_id = coordinator.begin_transaction(
        identity.producer_id, identity.producer_generation
    )
    for sequence, value in enumerate([b"t1", b"t2"]):
        old_leader.produce(
            TOPIC.topic,
            0,
            batch([value], identity, sequence=sequence, transaction_id=transaction_id),
            transaction_id=transaction_id,
        )

    # Broker 1's copier stops between its MARK_APPLYING and the append (past
    # the copier's own check that the log ends where the copy starts).
    data_log = cluster.partition(1).log
    append_all = data_log.append_all_as_leader
    reached, release = threading.Event(), threading.Event()
    outcome: list[BaseException | tuple[int, int]] = []

    def paused_append(batches: Iterable[bytes | memoryview], **options: Any) -> tuple[int, int]:
        # Read as a streaming copy reads them: its LMDB read transaction keeps seeing the
        # entries after the new leader's MARK_APPLIED, applied here meanwhile, deletes them.
        read = [bytes(view) for view in batches]
        reached.set()
        release.wait(10)
        try:
            result = append_all(read, **options)
        except BaseException as error:
            outcome.append(error)
            raise
        outcome.append(result)
        return result

    data_log.append_all_as_leader = paused_append  # type: ignore[method-assign]
    coordinator.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation
    )
    assert reached.wait(10), "broker 1's copy did not begin"
    # Its MARK_APPLYING reaches the followers while the copy is appended (J4 as
    # docs/formats.md's "A copy beside its marks" says): broker 2 holds it before it is
    # promoted, so its promotion finishes this copy (J6) before anything else.
    wait_for(
        "broker 2 to hold broker 1's MARK_APPLYING",
        lambda: cluster.journal_log_bytes(2) == cluster.journal_log_bytes(1),
    )

    # Leadership moves to broker 2 (a controlled shutdown of broker 1); its first write
    # finishes the copy (J6), and broker 1, following it now, fetches that copy.
    cluster.roles(leader=2, epoch=2)
    new_leader = cluster.brokers[2]
    new_leader.produce(TOPIC.topic, 0, batch([b"after 1"]))
    wait_for(
        "broker 1 to hold the new leader's copy",
        lambda: cluster.log_bytes(1) == cluster.log_bytes(2),
    )
    assert cluster.partition(1).log.leader_epoch == 2  # a follower stamps what it fetched

    # Broker 1 stops fetching (it is restarting), and its stale copy goes on.
    cluster.cut = {1}
    cluster.roles(leader=2, epoch=2, isr=(2, 3), to=[2, 3])
    end_before = cluster.partition(1).log.log_end_offset
    release.set()
    wait_for("the stale copy to end", lambda: bool(outcome))
    assert isinstance(outcome[0], NotLeaderOrFollowerError), outcome
    assert cluster.partition(1).log.log_end_offset == end_before  # nothing appended

    # The new leader's log grows past where the stale copy would have ended, then
    # broker 1 follows again: its log is the leader's, and the copy is there once.
    for number in (2, 3, 4):
        new_leader.produce(TOPIC.topic, 0, batch([b"after %d" % number]))
    cluster.cut = set()
    cluster.roles(leader=2, epoch=2, to=[1])
    deadline = time.monotonic() + 10
    while cluster.log_bytes(1) != cluster.log_bytes(2) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert cluster.values(cluster.brokers[1]) == cluster.values(new_leader)
    assert cluster.values(new_leader) == [
        b"before",
        b"t1",
        b"t2",
        b"after 1",
        b"after 2",
        b"after 3",
        b"after 4",
    ]
    wait_for(
        "the transaction to be APPLIED on the new leader",
        lambda: (
            (record := new_leader.journal.transaction(NAME, transaction_id)) is not None
            and record.state is CopyState.APPLIED
        ),
    )
