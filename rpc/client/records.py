"""What the client hands to users: consumed records and produced records' metadata."""

from __future__ import annotations

from typing import NamedTuple

Headers = tuple[tuple[str, bytes | None], ...]


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


class RecordMetadata(NamedTuple):
    """Where a produced record went.

    ``offset_pending`` is True for a transactional record: it is journaled, and gets its
    data-log offset only when its transaction is applied, after commit; ``offset`` is
    then -1 (the offset resolves on commit and is not reported back: read the records
    with a consumer to learn it). ``offset`` is also -1, with ``offset_pending`` False,
    for a retried batch the broker had already written (written, offset not reported).
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    offset_pending: bool = False

    @property
    def has_offset(self) -> bool:
        """Whether ``offset`` is the record's offset (Kafka's ``RecordMetadata.hasOffset``)."""
        return self.offset >= 0
