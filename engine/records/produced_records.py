"""The check at the door of produce: every record of a producer's batch, before any write.

The broker calls ``check_produced_records`` on each batch a client sends (plain or
transactional) after its CRC and header were checked. It bounds what the check may
cost first (records per batch, decompressed bytes, the broker-wide decompression
budget), then decodes every record with the one record decoder, so that what the log
stores is what every reader accepts (Kafka's record validation, InvalidRecordException).
"""

from __future__ import annotations

from twinlog.engine.base.errors import BatchTooLargeError, InvalidRecordError
from twinlog.engine.records.batch_format import RECORDS_OFFSET, BatchHeader
from twinlog.engine.records.compression import (
    CODEC_NAMES,
    decompress,
    decompressed_size,
    decompressed_size_declared,
)
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.records.record_decoder import check_records


def check_produced_records(
    batch: bytes | memoryview,
    header: BatchHeader,
    *,
    topic: str,
    partition: int,
    records_max: int,
    decompressed_bytes_max: int,
    budget: DecompressionBudget,
) -> bool:
    """Check every record of a producer's whole, CRC-checked batch (nothing is kept: the
    batch itself is what gets written); True if every record has a key, False if one has
    a null key (which only a compacted topic refuses), or an error.

    BatchTooLargeError for more than ``records_max`` records or a section declaring more
    than ``decompressed_bytes_max`` (refused before anything is decompressed) or, when its
    codec declares no size, decompressing to more (counted in small pieces, none kept); the
    budget then holds exactly what it inflates to while the records are checked.
    CorruptBatchError for a section that does not decompress; InvalidRecordError (naming
    topic, partition and record) for any malformed record; NotEnoughResourcesError
    (retriable) when the budget stays spent.
    """
    where = f"{topic}-{partition}"
    if header.record_count > records_max:
        raise BatchTooLargeError(
            f"batch for {where} holds {header.record_count} records, more than the broker's "
            f"batch_records_max ({records_max}); send fewer records per batch"
        )
    section = memoryview(batch)[RECORDS_OFFSET : header.size_bytes]
    # What the section declares (zstd, lz4, snappy), else what it decompresses to, counted
    # in small pieces that are dropped as they come (gzip; zstd and lz4 without a size):
    # a bomb is refused here, before it is inflated, and holds none of the budget.
    codec = header.codec
    declared_bytes = decompressed_size_declared(codec, section)
    if codec and declared_bytes is not None and declared_bytes > decompressed_bytes_max:
        raise BatchTooLargeError(
            f"batch for {where} declares {declared_bytes} bytes of {CODEC_NAMES[codec]} "
            f"records decompressed, more than the broker's batch_decompressed_bytes_max "
            f"({decompressed_bytes_max}); send smaller batches"
        )
    inflated_bytes = (
        declared_bytes
        if declared_bytes is not None
        else decompressed_size(codec, section, decompressed_bytes_max)
    )
    if codec and inflated_bytes > decompressed_bytes_max:
        raise BatchTooLargeError(
            f"batch for {where} holds {CODEC_NAMES[codec]} records that decompress to more "
            f"than the broker's batch_decompressed_bytes_max ({decompressed_bytes_max}; "
            "counted in pieces, refused before they were inflated); send smaller batches"
        )
    try:
        if not codec:
            # The request's own bytes, checked in place: nothing is allocated, so nothing
            # is reserved (a reservation of 0 bytes never waits; it cost a lock here).
            return check_records(section, header)
        with budget.reserve(inflated_bytes):
            # Held to the size reserved: one that inflates to more is refused.
            return check_records(decompress(codec, section, inflated_bytes), header)
    except InvalidRecordError as error:
        raise InvalidRecordError(
            f"batch for {where} refused: {error}; build batches with a record batch "
            "builder (offset deltas 0..n-1, one per record)",
            topic=topic,
            partition=partition,
            record_index=error.record_index,
        ) from None
