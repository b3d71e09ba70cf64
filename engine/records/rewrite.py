"""Records as log compaction sees them: where each lies in its batch, and batches rebuilt
without some of them.

Compaction reads a batch's records section once (decompressed), notes for each
record its byte span, offset, timestamp and key (decoded by
``record_decoder.decode_records``, as every reader of records does), and
decides which to keep. A batch that keeps every record is copied byte for
byte. Otherwise it is rebuilt here, and only here (the produce and apply paths
never re-encode):

* ``rebuild_batch`` keeps every header field (base offset, last offset delta,
  timestamps, producer id / generation / base sequence, partition leader epoch,
  attributes, so also the codec) and changes only what the dropped records
  change: ``record_count``, the records section (the kept records' bytes,
  unchanged, so each keeps its offset delta and timestamp delta; compressed
  again with the batch's codec), ``batch_length`` and the CRC. Offsets inside a
  batch then have gaps, as in Kafka: ``record_count <= last_offset_delta + 1``
  is what ``twinlog.engine.records.batch_format.read_header`` accepts, and ``next_offset`` is
  unchanged, so the batch after it still follows it. With no record kept it is
  an *empty batch* (``record_count`` 0), which compaction keeps only to hold a
  producer's last sequence (see compaction.py).
* ``filler_batch`` is a new batch with no records that spans a run of batches
  whose records were all dropped: base offset of the first, last offset delta
  up to the end of the last, no producer, codec none, 61 bytes, the run's
  partition leader epoch.
  It keeps batch offsets contiguous without keeping anything of the run.

``require_keys`` is the check at the door of a compacted topic: a record with
a null key could never be superseded, so it is refused there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records.batch_format import (
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_GENERATION,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORDS_OFFSET,
    BatchHeader,
    pack_header,
)
from twinlog.engine.records.compression import CODEC_NONE, compress, decompress
from twinlog.engine.records.record_decoder import RecordColumns, decode_records


class RecordSpan(NamedTuple):
    """One record of a decompressed records section."""

    start: int  # position of its length varint in the section
    end: int  # position after its last byte
    offset: int  # base offset + offset delta
    timestamp_ms: int  # first timestamp + timestamp delta
    key: bytes | None
    is_tombstone: bool  # null value: deletes the key


def records_section(batch: bytes | memoryview, header: BatchHeader) -> bytes | memoryview:
    """The decompressed records section of a whole, CRC-checked batch."""
    return decompress(header.codec, memoryview(batch)[RECORDS_OFFSET : header.size_bytes])


def iter_record_spans(section: bytes | memoryview, header: BatchHeader) -> Iterator[RecordSpan]:
    """Each record of ``section`` (the batch's records, decompressed), bounds checked.

    Decodes the whole section first (``record_decoder.decode_records``), so it
    raises CorruptBatchError, before yielding any span, for a malformed record, a
    record count that does not match, an offset delta outside the batch, or
    trailing bytes.
    """
    columns = decode_records(section, header)
    yield from map(
        RecordSpan,
        columns.starts(),
        columns.ends,
        columns.offsets,
        columns.timestamps_ms,
        columns.keys,
        [value is None for value in columns.values],
    )


def require_keys(
    batch: bytes | memoryview,
    header: BatchHeader,
    where: str,
    columns: RecordColumns | None = None,
) -> None:
    """Refuse a batch for a compacted log if any record has a null key (CorruptBatchError).

    Compaction keeps the latest record *per key*; a keyless record has no later
    record that could replace it, so it would stay forever. Kafka refuses such
    records the same way (its InvalidRecordException). ``columns``: the batch's records
    if they were decoded already (at the door of produce), else they are decoded here.
    """
    if columns is None:
        columns = decode_records(records_section(batch, header), header)
    if None in columns.keys:
        number = columns.keys.index(None)
        raise CorruptBatchError(
            f"record {number} of the batch (offset delta "
            f"{columns.offsets[number] - header.base_offset}) has a null key, but {where} is "
            "compacted (cleanup.policy compact): it keeps the latest record per key, so every "
            "record needs a key. Give the record a key, or write to a topic with cleanup.policy "
            "delete"
        )


def _encode(header: BatchHeader, records: bytes, record_count: int) -> bytes:
    """A batch with ``header``'s fields, ``records`` (already compressed) and a fresh CRC."""
    buffer = bytearray(RECORDS_OFFSET + len(records))
    buffer[RECORDS_OFFSET:] = records
    pack_header(
        buffer,
        base_offset=header.base_offset,
        attributes=header.attributes,
        last_offset_delta=header.last_offset_delta,
        first_timestamp_ms=header.first_timestamp_ms,
        max_timestamp_ms=header.max_timestamp_ms,
        producer_id=header.producer_id,
        producer_generation=header.producer_generation,
        base_sequence=header.base_sequence,
        record_count=record_count,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    return bytes(buffer)


def rebuild_batch(
    header: BatchHeader, section: bytes | memoryview, kept: Iterable[RecordSpan]
) -> bytes:
    """The batch holding only the ``kept`` records of ``section`` (in order), header kept."""
    view = memoryview(section)
    spans = list(kept)
    raw = b"".join(view[span.start : span.end] for span in spans)
    return _encode(header, compress(header.codec, raw), len(spans))


def filler_batch(
    base_offset: int,
    next_offset: int,
    first_timestamp_ms: int,
    max_timestamp_ms: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A batch of no records spanning offsets ``[base_offset, next_offset)``.

    Its timestamps are those of the run it replaces, so the segment's largest
    timestamp (retention by age, the time index) does not change.
    """
    header = BatchHeader(
        base_offset=base_offset,
        batch_length=0,  # set by _encode
        partition_leader_epoch=partition_leader_epoch,
        magic=MAGIC,
        crc=0,
        attributes=CODEC_NONE,
        last_offset_delta=next_offset - base_offset - 1,
        first_timestamp_ms=first_timestamp_ms,
        max_timestamp_ms=max_timestamp_ms,
        producer_id=NO_PRODUCER_ID,
        producer_generation=NO_PRODUCER_GENERATION,
        base_sequence=NO_SEQUENCE,
        record_count=0,
    )
    return _encode(header, b"", 0)
