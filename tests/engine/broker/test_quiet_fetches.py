"""A fetch round carries every log a follower copies from its leader, and a write changes
one or two of them: the others' answers are quiet. A quiet log costs the leader no high
watermark advance (the follower's fetch offset is one it already counted) and the
follower no application (no records, nothing moved); a write after quiet rounds still
replicates and its high watermark still reaches the followers; a leader whose
journal-log queueing is behind is still repaired by the next fetch, quiet or not; and an
answer of one batch is appended without the append-in-progress mark (a reader of the
files sees one batch whole or not at all), an answer of several with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch
from replication_support import TOPIC, Cluster

from twinlog.engine.broker.partition import Partition

QUIET_ROUNDS = 20


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Broker 1 leads, every broker in sync (no lag drops one while a test pumps by hand)."""
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=60_000)
    opened.roles(leader=1, epoch=1)
    yield opened
    opened.close()


def _replicated(cluster: Cluster, records: int) -> None:
    cluster.start_pumping()
    for number in range(records):
        cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"v%d" % number]))
    cluster.stop_pumping()
    cluster.pump_once()  # the followers learn the last high watermark


def _count_calls(
    monkeypatch: pytest.MonkeyPatch, partition: Partition, name: str, counts: dict[str, int]
) -> None:
    original = getattr(partition, name)

    def counted(*args: object, **kwargs: object) -> object:
        counts[name] = counts.get(name, 0) + 1
        return original(*args, **kwargs)

    monkeypatch.setattr(partition, name, counted)


def test_quiet_rounds_move_nothing_and_a_later_write_still_replicates(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replicated(cluster, 3)
    leader = cluster.brokers[1].partition(TOPIC)
    followers = [cluster.brokers[broker_id].partition(TOPIC) for broker_id in (2, 3)]
    assert all(f.high_watermark.value == 3 for f in followers)
    at_leader: dict[str, int] = {}
    at_followers: dict[str, int] = {}
    _count_calls(monkeypatch, leader, "_advance_high_watermark", at_leader)
    for follower in followers:
        _count_calls(monkeypatch, follower, "_wake_fetchers", at_followers)
        _count_calls(monkeypatch, follower, "_apply_fetched_journal", at_followers)
    for _ in range(QUIET_ROUNDS):
        cluster.pump_once()
    assert at_leader == {}, "a fetch offset the leader had counted advanced its high watermark"
    assert at_followers == {}, "a quiet answer was applied"

    _replicated(cluster, 1)  # a write after the quiet rounds
    assert at_leader.get("_advance_high_watermark", 0) > 0
    assert at_followers.get("_wake_fetchers", 0) > 0
    assert leader.high_watermark.value == 4
    assert all(f.high_watermark.value == 4 for f in followers)
    assert all(f.log.log_end_offset == 4 for f in followers)


def test_a_journal_queueing_left_behind_is_advanced_by_a_quiet_fetch(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replicated(cluster, 2)
    leader = cluster.brokers[1].partition(TOPIC)
    advances: dict[str, int] = {}
    _count_calls(monkeypatch, leader, "_advance_high_watermark", advances)
    # As after a ``commit_to`` that failed part way: the next advance, whatever asks for
    # it, queues the rest; a quiet fetch is often the only one coming.
    monkeypatch.setattr(leader, "_journal_queueing_behind", lambda: True)
    cluster.pump_once()
    assert advances.get("_advance_high_watermark", 0) > 0


def test_one_fetched_batch_is_appended_unmarked_and_several_marked(cluster: Cluster) -> None:
    _replicated(cluster, 1)
    leader = cluster.brokers[1].partition(TOPIC)
    follower = cluster.brokers[2].partition(TOPIC)
    marks = follower.log._append_marks
    before = marks.state.sequence
    with leader._plain_lock:  # written without waiting for the replicas
        leader.log.append_as_leader(batch([b"one"]), validate=False)
    cluster.pump_once()
    assert follower.log.log_end_offset == 2
    assert marks.state.sequence == before, "one batch was marked"
    with leader._plain_lock:
        leader.log.append_as_leader(batch([b"two"]), validate=False)
        leader.log.append_as_leader(batch([b"three"]), validate=False)
    cluster.pump_once()
    assert follower.log.log_end_offset == 4
    assert marks.state.sequence == before + 2, "two batches in one answer were not marked"
    assert marks.state.in_progress == 0
