"""LogReader: reading a data directory with no DataLog, no recovery and no writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_support import batch_positions, batch_values, flip_bit, make_batch, segment_files

from twinlog.engine.base.errors import CorruptLogError, OffsetOutOfRangeError
from twinlog.engine.log import DataLog, LogConfig, LogReader

CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=100)


def _write(directory: Path, batches: int = 30) -> list[bytes]:
    written = [make_batch(2, value_bytes=25, tag=n) for n in range(batches)]
    with DataLog.open(directory, CONFIG) as log:
        log.append_many(written)
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
