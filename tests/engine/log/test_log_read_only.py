"""LogReader: reading a data directory with no DataLog, no recovery and no writes."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from log_support import batch_positions, batch_values, flip_bit, make_batch, segment_files

from twinlog.engine.base.errors import CorruptLogError, OffsetOutOfRangeError
from twinlog.engine.log import DataLog, LogConfig, LogReader

CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=100)


def _write(directory: Path, batches: int = 30) -> list[bytes]:
    written = [make_batch(2, value_bytes=25, tag=n) for n in range(batches)]
    with DataLog.open(directory, CONFIG) as log:
        log.append_all_as_leader(written)
    return written


def _values(reader: LogReader, **bounds: int) -> list[bytes | None]:
    return batch_values(b"".join(bytes(batch) for _, batch in reader.iter_batches(**bounds)))


def test_reads_every_batch_in_order(tmp_path: Path) -> None:
    written = _write(tmp_path)
    reader = LogReader(tmp_path)
    assert len(reader.segment_base_offsets()) > 3
    assert _values(reader) == batch_values(b"".join(written))
    headers = [header for header, _ in reader.iter_batches()]
    assert [h.base_offset for h in headers] == list(range(0, 60, 2))


@pytest.mark.parametrize(
    ("from_offset", "to_offset"), [(0, 60), (13, 60), (31, 41), (59, None), (60, None)]
)
def test_reads_between_offsets(tmp_path: Path, from_offset: int, to_offset: int | None) -> None:
    written = _write(tmp_path)
    first = from_offset // 2
    last = len(written) if to_offset is None else -(-to_offset // 2)
    bounds = {"from_offset": from_offset} | ({} if to_offset is None else {"to_offset": to_offset})
    assert _values(LogReader(tmp_path), **bounds) == batch_values(b"".join(written[first:last]))


def test_stops_quietly_at_a_partial_last_batch(tmp_path: Path) -> None:
    written = _write(tmp_path)
    last = segment_files(tmp_path)[-1]
    with open(last, "ab") as file:
        file.write(written[0][:40])  # a batch the writer is still writing
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert _values(LogReader(tmp_path)) == batch_values(b"".join(written))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # wrote nothing


def test_a_bad_batch_in_an_earlier_segment_raises(tmp_path: Path) -> None:
    _write(tmp_path)
    first = segment_files(tmp_path)[0]
    position = batch_positions(first)[1][0]
    flip_bit(first, position + 30)
    with pytest.raises(CorruptLogError) as caught:
        list(LogReader(tmp_path).iter_batches())
    assert (caught.value.path, caught.value.position) == (str(first), position)


def test_a_stale_index_is_only_a_hint(tmp_path: Path) -> None:
    written = _write(tmp_path)
    for index in tmp_path.glob("*.index"):
        index.write_bytes(os.urandom(index.stat().st_size))
    assert _values(LogReader(tmp_path), from_offset=25) == batch_values(b"".join(written[12:]))


def test_below_the_log_start(tmp_path: Path) -> None:
    _write(tmp_path)
    with DataLog.open(tmp_path, LogConfig(segment_bytes=500, retention_bytes=600)) as log:
        log.apply_retention()
        start = log.log_start_offset
    reader = LogReader(tmp_path)
    assert reader.log_start_offset() == start
    assert next(iter(reader.iter_batches()))[0].base_offset == start
    with pytest.raises(OffsetOutOfRangeError):
        list(reader.iter_batches(from_offset=start - 1))


def test_the_end_stops_before_an_append_all_as_leader_in_progress(tmp_path: Path) -> None:
    # append_all_as_leader (a transaction's copy) writes its batches one by one and publishes
    # them at once; a reader of the files must not end inside it either.
    seen: list[tuple[int, int]] = []

    def copy(log: DataLog, first_offset: int) -> Iterator[bytes]:
        for n in range(6):
            yield make_batch(2, value_bytes=25, tag=100 + n)
            # append_all_as_leader wrote every batch before this one: read the files now.
            reader = LogReader(tmp_path)
            ends = [header.next_offset for header, _ in reader.iter_batches()]
            seen.append((reader.end_offset(), ends[-1] if ends else 0))

    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_all_as_leader([make_batch(2, value_bytes=25, tag=n) for n in range(3)])
        assert LogReader(tmp_path).end_offset() == 6
        log.append_all_as_leader(copy(log, 6))
        assert LogReader(tmp_path).end_offset() == 18
        log.append_as_leader(make_batch(1, value_bytes=25))
        assert LogReader(tmp_path).end_offset() == 19
    assert seen == [(6, 6)] * 6  # never inside the copy, by end or by iteration
    assert LogReader(tmp_path).end_offset() == 19


def test_an_append_all_as_leader_that_fails_is_never_seen(tmp_path: Path) -> None:
    def failing() -> Iterator[bytes]:
        yield make_batch(2, value_bytes=25, tag=1)
        yield make_batch(2, value_bytes=25, tag=2)
        raise RuntimeError("the journal went away")

    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_as_leader(make_batch(1, value_bytes=25))
        with pytest.raises(RuntimeError):
            log.append_all_as_leader(failing())
        assert LogReader(tmp_path).end_offset() == 1
        log.append_as_leader(make_batch(1, value_bytes=25))
    assert LogReader(tmp_path).end_offset() == 2


def test_a_copy_cut_short_by_a_kill_stays_hidden_until_the_next_write(tmp_path: Path) -> None:
    # A kill in the middle of append_all_as_leader leaves its batches on disk; the broker's
    # next open cuts or finishes the copy (the copier's recovery), and only its next
    # write says the tail is whole again.
    _kill_inside_an_append_all_as_leader(tmp_path)
    reader = LogReader(tmp_path)
    assert segment_files(tmp_path)[0].stat().st_size > len(make_batch(1, value_bytes=25))
    assert [h.next_offset for h, _ in reader.iter_batches()] == [1]  # the torn copy is not
    assert reader.end_offset() == 1
    with DataLog.open(tmp_path, CONFIG) as log:
        assert reader.end_offset() == 1  # opening alone does not make the tail whole
        log.truncate_to(1)  # what the copier's recovery does with a torn copy
        assert reader.end_offset() == 1
        log.append_as_leader(make_batch(1, value_bytes=25))
    assert reader.end_offset() == 2


def test_an_append_all_as_leader_of_one_batch_writes_no_mark(tmp_path: Path) -> None:
    # One batch is seen whole or not at all (its CRC): the mark, two file replacements
    # per copy, is written only for two batches or more.
    mark = tmp_path / "append-state"
    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_all_as_leader([make_batch(2, value_bytes=25, tag=1)], batch_count=1)
        assert not mark.exists()
        log.append_all_as_leader([make_batch(2, value_bytes=25, tag=n) for n in range(2)])
        assert mark.exists()
        written = mark.read_bytes()
        log.append_all_as_leader([make_batch(2, value_bytes=25, tag=3)], batch_count=1)
        assert mark.read_bytes() == written  # finished already: left as it was
        with pytest.raises(ValueError, match="told of 1 batches"):
            log.append_all_as_leader(
                [make_batch(2, value_bytes=25, tag=n) for n in (4, 5)], batch_count=1
            )
        assert log.log_end_offset == 8  # the refused call kept nothing
    assert LogReader(tmp_path).end_offset() == 8


def test_an_append_all_as_leader_of_one_batch_clears_a_mark_a_kill_left(tmp_path: Path) -> None:
    _kill_inside_an_append_all_as_leader(tmp_path)
    with DataLog.open(tmp_path, CONFIG) as log:
        log.truncate_to(1)  # what the copier's recovery does with a torn copy
        assert LogReader(tmp_path).end_offset() == 1
        log.append_all_as_leader([make_batch(2, value_bytes=25, tag=3)], batch_count=1)
    assert LogReader(tmp_path).end_offset() == 3


def _kill_inside_an_append_all_as_leader(directory: Path) -> None:
    """A log of one batch, then a child process SIGKILLed in the middle of an append_all_as_leader
    of two more: their bytes stay on disk, the append-in-progress mark in place."""
    with DataLog.open(directory, CONFIG) as log:
        log.append_as_leader(make_batch(1, value_bytes=25))

    def killed() -> Iterator[bytes]:
        yield make_batch(2, value_bytes=25, tag=1)
        yield make_batch(2, value_bytes=25, tag=2)
        os.kill(os.getpid(), signal.SIGKILL)

    child = os.fork()
    if child == 0:  # pragma: no cover (the child dies inside append_all_as_leader)
        try:
            DataLog.open(directory, CONFIG).append_all_as_leader(killed())
        finally:
            os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
