"""Helpers shared by the data log tests (imported as ``log_support``; holds no tests)."""

from __future__ import annotations

import struct
from pathlib import Path

from twinlog.engine.log import DataLog
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.batch_reader import Record, iter_batches

TIMESTAMP_MS = 1_700_000_000_000


def make_batch(
    record_count: int = 1, value_bytes: int = 10, timestamp_ms: int = TIMESTAMP_MS, tag: int = 0
) -> bytes:
    """An uncompressed batch whose values name ``tag`` and the record, so reads can be checked."""
    builder = RecordBatchBuilder("none")
    for record in range(record_count):
        value = f"{tag}:{record}:".encode().ljust(value_bytes, b"v")
        builder.append(value, timestamp_ms=timestamp_ms)
    return builder.build()


def batch_values(data: bytes) -> list[bytes | None]:
    return [record.value for batch in iter_batches(data) for record in batch.records()]


def headers_of(data: bytes) -> list[BatchHeader]:
    return [batch.header for batch in iter_batches(data)]


def read_all(log: DataLog, from_offset: int | None = None, max_bytes: int = 1 << 20) -> bytes:
    """Every byte from ``from_offset`` (default: the log start) to the end, via ``read``."""
    offset = log.log_start_offset if from_offset is None else from_offset
    chunks = []
    while offset < log.log_end_offset:
        chunk = log.read(offset, max_bytes)
        assert chunk, f"read({offset}) returned nothing below the end {log.log_end_offset}"
        chunks.append(chunk)
        offset = headers_of(chunk)[-1].next_offset
    return b"".join(chunks)


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def flip_bit(path: Path, position: int, bit: int = 0) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ (1 << bit)]))


def batch_positions(path: Path) -> list[tuple[int, int]]:
    """(position, size) of each batch in a segment file, from the length fields alone."""
    data = path.read_bytes()
    positions = []
    position = 0
    while position + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        positions.append((position, 12 + length))
        position += 12 + length
    return positions


def all_batches(log: DataLog) -> list[tuple[BatchHeader, list[Record]]]:
    """Every batch of ``log`` with its records, decoded."""
    return [(batch.header, list(batch.records())) for batch in iter_batches(read_all(log))]
