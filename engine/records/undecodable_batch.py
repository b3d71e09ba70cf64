"""A batch whose CRC holds but whose records do not decode, named for its reader.

Old data may hold such a batch (written before the broker checked records at the door).
Every reader (the consumer, the Spark source) reports it the same way: InvalidRecordError
with where the batch is and the offset to seek to to skip it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from twinlog.engine.base.errors import CorruptBatchError, InvalidRecordError
from twinlog.engine.records.batch_format import BatchHeader


@contextmanager
def naming_the_batch(topic: str, partition: int, header: BatchHeader) -> Iterator[None]:
    """Turns a CorruptBatchError raised inside it into InvalidRecordError naming the batch."""
    try:
        yield
    except CorruptBatchError as error:
        raise InvalidRecordError(
            f"{topic}-{partition}: the batch at offset {header.base_offset} holds a record "
            f"that does not decode ({error}); seek to {header.next_offset} to skip its "
            f"{header.last_offset_delta + 1} offsets",
            topic=topic,
            partition=partition,
            offset=header.base_offset,
            record_index=getattr(error, "record_index", None),
            next_offset=header.next_offset,
        ) from None
