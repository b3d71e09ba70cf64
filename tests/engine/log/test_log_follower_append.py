"""A follower's append (``DataLog.append_as_follower``): a leader's batches kept byte for byte,
offsets and epochs included, so replicas of one log are identical (CLUSTER.md §3.3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_support import make_batch, read_all, segment_files

from twinlog.engine.base.errors import BatchTooLargeError, CorruptBatchError
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.records.batch_reader import split_batches

SMALL_SEGMENTS = LogConfig(segment_bytes=600)


def _leader_with_two_epochs(directory: Path) -> DataLog:
    leader = DataLog.open(directory, SMALL_SEGMENTS, leader_epoch=3)
    for tag in range(4):
        leader.append_as_leader(make_batch(record_count=2, tag=tag))
    leader.become_leader(5)
    for tag in range(4, 7):
        leader.append_as_leader(make_batch(record_count=3, tag=tag))
    return leader


def test_replicated_batches_are_the_leaders_bytes_and_epochs(tmp_path: Path) -> None:
    leader = _leader_with_two_epochs(tmp_path / "leader")
    follower = DataLog.open(tmp_path / "follower", SMALL_SEGMENTS)
    offset = 0
    while offset < leader.log_end_offset:  # as a fetcher does: a few batches per round
        fetched = leader.read(offset, 300)
        _, offset = follower.append_as_follower(split_batches(fetched))
    assert read_all(follower) == read_all(leader)
    assert follower.epochs.entries == leader.epochs.entries
    assert follower.leader_epoch == 5
    assert len(segment_files(tmp_path / "follower")) > 1  # rolled like any log
    follower.close()
    reopened = DataLog.open(tmp_path / "follower", SMALL_SEGMENTS)
    assert read_all(reopened) == read_all(leader)
    assert reopened.epochs.end_offset_for_epoch(3, reopened.log_end_offset) == (
        leader.epochs.end_offset_for_epoch(3, leader.log_end_offset)
    )


def test_a_gap_or_a_damaged_batch_appends_nothing_of_the_call(tmp_path: Path) -> None:
    leader = _leader_with_two_epochs(tmp_path / "leader")
    follower = DataLog.open(tmp_path / "follower", SMALL_SEGMENTS)
    batches = list(split_batches(read_all(leader)))
    follower.append_as_follower(batches[:2])
    with pytest.raises(CorruptBatchError, match="starts at offset"):
        follower.append_as_follower(batches[3:5])  # batch 2 missing
    damaged = bytearray(batches[5])
    damaged[-1] ^= 1
    with pytest.raises(CorruptBatchError):
        follower.append_as_follower([*batches[2:5], bytes(damaged)])  # 4 opens epoch 5
    assert read_all(follower) == b"".join(bytes(batch) for batch in batches[:2])
    assert follower.epochs.latest_epoch == 3  # epoch 5 of the refused batches is forgotten
    assert follower.leader_epoch == 3


def test_truncating_a_follower_forgets_the_epochs_of_the_cut_suffix(tmp_path: Path) -> None:
    leader = _leader_with_two_epochs(tmp_path / "leader")
    follower = DataLog.open(tmp_path / "follower", SMALL_SEGMENTS)
    follower.append_as_follower(split_batches(read_all(leader)))
    epoch_five_start = leader.epochs.entries[-1].start_offset
    follower.truncate_to(epoch_five_start)
    assert follower.epochs.latest_epoch == 3
    follower.become_leader(6)  # promoted after the cut: epoch 6 starts at its end
    follower.append_as_leader(make_batch(tag=9))
    assert follower.epochs.entries[-1] == (6, epoch_five_start)


def test_split_batches_refuses_a_buffer_cut_inside_a_batch(tmp_path: Path) -> None:
    data = make_batch(record_count=2) + make_batch(record_count=2)
    assert [len(view) for view in split_batches(data)] == [len(data) // 2] * 2
    with pytest.raises(CorruptBatchError, match="cut inside a batch"):
        list(split_batches(data[:-3]))


def _leader_past_its_first_segments(directory: Path) -> tuple[DataLog, int]:
    """A leader whose retention dropped its first segments: (it, its log start)."""
    leader = _leader_with_two_epochs(directory)
    leader.delete_segments_before(leader.log_end_offset)
    assert leader.log_start_offset > 0
    return leader, leader.log_start_offset


def test_a_follower_behind_its_leaders_log_start_restarts_there(tmp_path: Path) -> None:
    leader, start = _leader_past_its_first_segments(tmp_path / "leader")
    follower = DataLog.open(tmp_path / "follower", SMALL_SEGMENTS)
    follower.append_as_follower(split_batches(make_batch(record_count=1, tag=99)))  # stale
    assert follower.log_end_offset < start
    assert follower.truncate_fully_and_start_at(start) == 1
    assert (follower.log_start_offset, follower.log_end_offset) == (start, start)
    assert follower.epochs.entries == ()
    assert read_all(follower) == b""
    follower.append_as_follower(split_batches(leader.read(start, 1 << 20)))
    assert read_all(follower) == read_all(leader)
    follower.close()
    reopened = DataLog.open(tmp_path / "follower", SMALL_SEGMENTS)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (
        start,
        leader.log_end_offset,
    )
    assert reopened.epochs.entries == leader.epochs.entries
    with pytest.raises(ValueError, match="already reaches"):
        reopened.truncate_fully_and_start_at(start)


def test_a_crash_between_deleting_and_creating_opens_empty_at_the_new_start(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "follower"
    follower = DataLog.open(directory, SMALL_SEGMENTS)
    follower.append_as_follower(split_batches(make_batch(record_count=2, tag=1)))
    follower.truncate_fully_and_start_at(40)
    follower.close()
    for path in segment_files(directory):  # as if the new segment was never created
        path.unlink()
    reopened = DataLog.open(directory, SMALL_SEGMENTS)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (40, 40)


def test_an_unmarked_follower_append_replaces_no_mark_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal log's follower appends without the append-in-progress mark: no reader of
    the files opens a journal log, and each mark is two files replaced per fetch."""
    import twinlog.engine.log.append_marks as append_marks_module

    marks: list[object] = []
    real_write = append_marks_module.write_append_state
    monkeypatch.setattr(
        append_marks_module,
        "write_append_state",
        lambda directory, state: (marks.append(state), real_write(directory, state)),
    )
    leader = _leader_with_two_epochs(tmp_path / "leader")
    follower = DataLog.open(tmp_path / "follower", SMALL_SEGMENTS)
    follower.append_as_follower(split_batches(leader.read(0, 300)), marked=False)
    assert marks == []
    follower.append_as_follower(split_batches(leader.read(follower.log_end_offset, 300)))
    assert len(marks) == 2  # marked (the default): started, then finished
    leader.close()
    follower.close()


def test_a_follower_copies_a_batch_over_its_own_limit(tmp_path: Path) -> None:
    """A topic's max.message.bytes changed live reaches the replicas one by one: a follower
    that still holds the lower limit copies the leader's larger batch (as Kafka's
    appendAsFollower ignores the record size) instead of refusing it forever."""
    leader = DataLog.open(tmp_path / "leader", leader_epoch=1)
    leader.append_as_leader(make_batch(record_count=40, tag=1))
    fetched = leader.read(0, 1 << 20)
    limit = len(fetched) - 1  # below the batch
    follower = DataLog.open(tmp_path / "follower", LogConfig(batch_bytes_max=limit))
    with pytest.raises(BatchTooLargeError):
        follower.append_as_leader(fetched)  # a producer's batch is still held to it
    follower.become_follower()
    follower.append_as_follower(split_batches(fetched))
    assert read_all(follower) == read_all(leader)
    leader.close()
    follower.close()
