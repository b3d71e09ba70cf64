"""Every check a produced batch passes before anything of it is journaled or written.

One place for both doors (gRPC and Kafka) and both kinds (plain and transactional):
its size against its topic's limit first (``max.message.bytes``, else the broker's
``batch_bytes_max``), before anything is decoded; then the header (CRC, one batch per
request, producer fields), the internal-topic rule, every record (what the log stores,
every reader accepts: count, decompressed size, a decompression budget shared by all
requests), and keys on a compacted topic.
"""

from __future__ import annotations

from twinlog.engine.base.errors import CorruptBatchError, InvalidConfigError
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.broker.internal_topics import refuse_internal
from twinlog.engine.broker.partition import Partition
from twinlog.engine.records.batch_format import (
    NO_PRODUCER_ID,
    NO_TRANSACTION_ID,
    BatchHeader,
    check_producer_batch,
    check_producer_generation,
    validate_batch,
)
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.records.produced_records import check_produced_records
from twinlog.engine.records.rewrite import require_keys


def check_produced_batch(
    target: Partition,
    batch: bytes,
    config: BrokerConfig,
    budget: DecompressionBudget,
) -> BatchHeader:
    """The batch's header, once every check passed (raises a typed error otherwise)."""
    topic, partition = target.topic_partition
    target.log.config.check_batch_bytes(len(batch), target.name)
    header = validate_batch(batch)
    if header.size_bytes != len(batch):  # the copier could never apply the extra bytes
        raise CorruptBatchError(
            f"request holds {len(batch)} bytes, its batch's length field says "
            f"{header.size_bytes}: send exactly one batch per request"
        )
    check_producer_batch(header)  # else one record could move the log end by 2**31
    check_producer_generation(header.producer_generation)
    refuse_internal(topic, "produce to")  # its records are the broker's own
    every_record_keyed = check_produced_records(
        batch,
        header,
        topic=topic,
        partition=partition,
        records_max=config.batch_records_max,
        decompressed_bytes_max=config.batch_decompressed_bytes_max,
        budget=budget,
    )
    if target.log.config.compacts and not every_record_keyed:
        # A keyless record could never be compacted away: refused, naming the record.
        require_keys(batch, header, f"topic {topic}")
    return header


def check_request_matches_batch(header: BatchHeader, transaction_id: int, attempt: str) -> None:
    """The request's transaction and attempt tag against the batch's transactional bit."""
    if not header.is_transactional:
        if transaction_id != NO_TRANSACTION_ID:
            raise InvalidConfigError(
                f"the request names transaction {transaction_id}, but its batch is not "
                "transactional (attributes bit 4): build it with transactional=True"
            )
        if attempt:
            raise InvalidConfigError("an attempt tag needs a transactional batch")
    elif header.producer_id == NO_PRODUCER_ID:
        raise InvalidConfigError(
            "a transactional batch needs the producer id and generation init_producer() "
            "returned; this one carries none"
        )


__all__ = ["check_produced_batch", "check_request_matches_batch"]
