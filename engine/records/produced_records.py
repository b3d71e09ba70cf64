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
from twinlog.engine.records.compression import decompress, decompressed_size_declared
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
    than ``decompressed_bytes_max`` (refused before anything is decompressed); InvalidRecordError (naming topic, partition and
    record) for any malformed record; NotEnoughResourcesError (retriable) when the budget
    stays spent.
    """
    where = f"{topic}-{partition}"
    if header.record_count > records_max:
        raise BatchTooLargeError(
            f"batch for {where} holds {header.record_count} records, more than the broker's "
            f"batch_records_max ({records_max}); send fewer records per batch"
        )
    section = memoryview(batch)[RECORDS_OFFSET : header.size_bytes]
    declared_bytes = decompressed_size_declared(header.codec, section)
    if header.codec and declared_bytes > decompressed_bytes_max:
        raise BatchTooLargeError(
            f"batch for {where} declares {declared_bytes} bytes of records decompressed, more "
            f"than the broker's batch_decompressed_bytes_max ({decompressed_bytes_max}); send "
            "smaller batches"
        )
    # An uncompressed section is the request's own bytes: nothing more is allocated for it.
    with budget.reserve(declared_bytes if header.codec else 0):
        try:
            # An uncompressed section is checked in place, not copied.
            return check_records(decompress(header.codec, section, decompressed_bytes_max), header)
        except InvalidRecordError as error:
            raise InvalidRecordError(
                f"batch for {where} refused: {error}; build batches with a record batch "
                "builder (offset deltas 0..n-1, one per record)",
                topic=topic,
                partition=partition,
                record_index=error.record_index,
            ) from None
