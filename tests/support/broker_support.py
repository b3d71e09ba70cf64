"""Record batches as a producer client would send them to the broker, for broker-level tests."""

from __future__ import annotations

from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.records.batch_builder import RecordBatchBuilder


def batch(
    values: list[bytes],
    identity: ProducerIdentity | None = None,
    sequence: int = -1,
    transaction_id: int = -1,
    codec: str = "zstd",
    keyed: bool = False,
) -> bytes:
    """One batch of ``values``: plain without ``identity``, idempotent with it, transactional
    with a ``transaction_id`` too. ``keyed`` gives each record its value's first 3 bytes as key."""
    builder = RecordBatchBuilder(
        codec,
        producer_id=identity.producer_id if identity else -1,
        producer_generation=identity.producer_generation if identity else -1,
        base_sequence=sequence,
        transactional=transaction_id != -1,
    )
    for value in values:
        builder.append(value, key=value[:3] if keyed else None)
    return builder.build()
