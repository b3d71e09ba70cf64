"""The leader epoch cache and its checkpoint file; the data log stamping its epoch."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_support import make_batch

from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.log.leader_epochs import (
    LEADER_EPOCH_CHECKPOINT_NAME,
    NO_EPOCH,
    NO_EPOCH_OFFSET,
    EpochEnd,
    EpochEntry,
    LeaderEpochCache,
    decode_checkpoint,
    encode_checkpoint,
)
from twinlog.engine.records.batch_format import validate_batch
from twinlog.engine.records.batch_reader import iter_batches


def cache_of(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path, [])
    for epoch, start_offset in entries:
        cache.assign(epoch, start_offset)
    return cache


def test_the_file_is_kafkas_text_format(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (0, 0), (3, 120))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_NAME).read_text() == "0\n2\n0 0\n3 120\n"
    assert decode_checkpoint(encode_checkpoint(cache.entries)) == list(cache.entries)


@pytest.mark.parametrize(
    "contents",
    [b"", b"1\n0\n", b"0\n2\n0 0\n", b"0\n2\n1 5\n0 9\n", b"0\n1\nx 0\n", b"0\n1\n0 0 7\n"],
    ids=["empty", "version", "count", "not-increasing", "not-a-number", "three-fields"],
)
def test_a_damaged_file_is_refused_by_the_decoder(contents: bytes) -> None:
    with pytest.raises(ValueError):
        decode_checkpoint(contents)


def test_assign_only_grows(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (0, 0), (2, 10))
    cache.assign(2, 15)  # the same epoch again: no-op
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10))
    with pytest.raises(ValueError, match="does not follow"):
        cache.assign(1, 20)
    with pytest.raises(ValueError, match="does not follow"):
        cache.assign(3, 5)
    assert cache.latest_epoch == 2


def test_epoch_for_offset_and_end_offset_for_epoch(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (1, 5), (2, 10), (4, 30))
    assert [cache.epoch_for_offset(o) for o in (0, 5, 9, 10, 29, 30, 99)] == [
        NO_EPOCH,
        1,
        1,
        2,
        2,
        4,
        4,
    ]
    log_end = 42
    # KIP-101/279: the start of the next higher epoch; the log end for the latest one.
    assert cache.end_offset_for_epoch(1, log_end) == EpochEnd(1, 10)
    assert cache.end_offset_for_epoch(3, log_end) == EpochEnd(2, 30)  # 3 unknown: 2's end
    assert cache.end_offset_for_epoch(4, log_end) == EpochEnd(4, log_end)
    assert cache.end_offset_for_epoch(7, log_end) == EpochEnd(4, log_end)
    assert cache.end_offset_for_epoch(0, log_end) == EpochEnd(NO_EPOCH, NO_EPOCH_OFFSET)


def test_truncation_from_either_end(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (0, 0), (1, 10), (2, 20))
    cache.truncate_from_end(20)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 10))
    cache.truncate_from_start(15)
    assert cache.entries == (EpochEntry(1, 15),)
    assert decode_checkpoint((tmp_path / LEADER_EPOCH_CHECKPOINT_NAME).read_bytes()) == [
        EpochEntry(1, 15)
    ]


def stamped_epochs(log: DataLog) -> list[tuple[int, int]]:
    data = log.read(log.log_start_offset, 1 << 24)
    return [(b.header.base_offset, b.header.partition_leader_epoch) for b in iter_batches(data)]


def test_the_log_stamps_its_epoch_and_the_crc_still_holds(tmp_path: Path) -> None:
    with DataLog.open(tmp_path) as log:
        assert log.leader_epoch == 0
        log.append_as_leader(make_batch(2))
        log.become_leader(3)
        log.append_as_leader(make_batch(1))
        log.append_all_as_leader([make_batch(1), make_batch(2)])
        assert stamped_epochs(log) == [(0, 0), (2, 3), (3, 3), (4, 3)]
        data = log.read(0, 1 << 24)
        for batch in iter_batches(data):
            validate_batch(batch.buffer)  # stamping patched bytes outside the CRC only
        assert log.epochs.entries == (EpochEntry(0, 0), EpochEntry(3, 2))
        with pytest.raises(ValueError, match="does not follow"):
            log.become_leader(2)
    with DataLog.open(tmp_path) as log:  # the epoch survives a reopen
        assert log.leader_epoch == 3
    with DataLog.open(tmp_path, leader_epoch=5) as log:
        assert log.epochs.entries[-1] == EpochEntry(5, 6)


def test_a_log_that_follows_refuses_the_leaders_appends_until_it_leads_again(
    tmp_path: Path,
) -> None:
    """The follower fence: a deposed leader's write still in flight lands nowhere."""
    with DataLog.open(tmp_path, leader_epoch=1) as log:
        log.append_as_leader(make_batch(1))
        log.become_follower()
        for append in (
            lambda: log.append_as_leader(make_batch(1)),
            lambda: log.append_all_as_leader([make_batch(1), make_batch(1)]),
        ):
            with pytest.raises(NotLeaderOrFollowerError, match="follows its partition's leader"):
                append()
        assert log.log_end_offset == 1
        log.become_leader(2)
        log.append_all_as_leader([make_batch(1)])
        assert stamped_epochs(log) == [(0, 1), (1, 2)]


def test_truncation_trims_the_epochs(tmp_path: Path) -> None:
    with DataLog.open(tmp_path) as log:
        log.append_as_leader(make_batch(2))
        log.become_leader(1)
        log.append_as_leader(make_batch(2))
        log.become_leader(2)
        log.append_as_leader(make_batch(2))
        log.truncate_to(2)
        assert log.epochs.entries == (EpochEntry(0, 0),)
        assert log.epochs.end_offset_for_epoch(2, log.log_end_offset) == EpochEnd(0, 2)
        log.append_as_leader(
            make_batch(1)
        )  # still epoch 2: its start is recorded again, at the end
        assert log.epochs.entries == (EpochEntry(0, 0), EpochEntry(2, 2))
        assert stamped_epochs(log) == [(0, 0), (2, 2)]


def test_retention_moves_the_first_epoch_up(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=200, retention_bytes=1)
    with DataLog.open(tmp_path, config) as log:
        for _ in range(4):
            log.append_as_leader(make_batch(3, value_bytes=40))
        log.apply_retention()
        assert log.log_start_offset > 0
        assert log.epochs.entries == (EpochEntry(0, log.log_start_offset),)


@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_a_missing_or_damaged_file_is_rebuilt_from_the_batches(tmp_path: Path, damage: str) -> None:
    with DataLog.open(tmp_path) as log:
        log.append_as_leader(make_batch(2))
        log.become_leader(4)
        log.append_as_leader(make_batch(1))
        log.become_leader(6)
        log.append_as_leader(make_batch(1))
        written = log.epochs.entries
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_NAME
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(b"0\n9\nnot a checkpoint\n")
    with DataLog.open(tmp_path) as log:
        assert (
            log.epochs.entries == written == (EpochEntry(0, 0), EpochEntry(4, 2), EpochEntry(6, 3))
        )
        assert log.leader_epoch == 6
    assert decode_checkpoint(path.read_bytes()) == list(written)  # written back


def test_entries_past_the_log_end_are_dropped_at_open(tmp_path: Path) -> None:
    # A crash between a truncation and the checkpoint's rewrite leaves such entries.
    with DataLog.open(tmp_path) as log:
        log.append_as_leader(make_batch(2))
    (tmp_path / LEADER_EPOCH_CHECKPOINT_NAME).write_bytes(
        encode_checkpoint([EpochEntry(0, 0), EpochEntry(1, 9)])
    )
    with DataLog.open(tmp_path) as log:
        assert log.epochs.entries == (EpochEntry(0, 0),)
