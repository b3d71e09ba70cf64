"""The streaming sink's progress: which query committed which micro-batch, kept in the broker.

It is stored as group offsets, so it commits atomically with the batch's rows:

    group      "spark-sink:<sinkId>"
    key        TopicPartition("__batch_id__", 0)      "offset": the micro-batch id
    keys       TopicPartition("__query_id__", 0..3)   "offsets": Spark's query id, a
                                                       UUID, as four 32-bit words
                                                       (most significant first)

(names no topic can take as a real partition of this group: the sink's group
commits nothing else.)

The micro-batch's transaction sends all five with ``send_offsets_to_transaction``
before the commit. If Spark crashes after the commit but before its own
checkpoint, it replays the batch with the same id; the sink reads the stored
progress and, finding the same query with an id >= the replayed one, aborts
instead of writing twice.

Why the query id: a batch id means something only within one checkpoint.
Spark's query id (``StreamingQuery.id``) is kept in the checkpoint: the same
after a restart from it, new when the checkpoint is deleted or replaced. Batch
ids start again at 0 after such a reset, so stored progress of another query
id is not this query's history: the sink starts fresh instead of dropping the
new query's batches as replays. Spark gives the id to tasks only (the local
property ``sql.streaming.queryId``); the driver's commit learns it from the
tasks' commit messages.

While a transaction holding these offsets is being committed, fetching them
answers PendingTransactionError (retriable), never a stale value: the read is
retried until the commit is applied.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from twinlog.connectors.spark.broker import retried
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.wire.broker_api import BrokerApi

BATCH_ID_KEY = TopicPartition("__batch_id__", 0)
QUERY_ID_WORDS = 4
QUERY_ID_KEYS = tuple(TopicPartition("__query_id__", word) for word in range(QUERY_ID_WORDS))
WORD_BITS = 32  # offsets are int64 and -1 means "none": 32-bit words never collide with it
NO_BATCH = -1
NO_OFFSET = -1


@dataclass(frozen=True)
class SinkProgress:
    """What the broker holds for a sink: the last committed micro-batch and its query."""

    batch_id: int  # NO_BATCH if nothing was committed yet
    query_id: str | None  # None if nothing was committed, or stored without a query id

    def last_committed_by(self, query_id: str) -> int:
        """The last micro-batch ``query_id`` committed, NO_BATCH if it committed none."""
        return self.batch_id if self.query_id == query_id else NO_BATCH


def sink_group(sink_id: str) -> str:
    return f"spark-sink:{sink_id}"


def query_id_words(query_id: str) -> tuple[int, ...]:
    number = uuid.UUID(query_id).int
    mask = (1 << WORD_BITS) - 1
    shifts = range((QUERY_ID_WORDS - 1) * WORD_BITS, -1, -WORD_BITS)
    return tuple((number >> shift) & mask for shift in shifts)


def query_id_of_words(words: tuple[int, ...]) -> str | None:
    if any(word == NO_OFFSET for word in words):
        return None
    number = 0
    for word in words:
        number = (number << WORD_BITS) | word
    return str(uuid.UUID(int=number))


def stored_progress(broker: BrokerApi, sink_id: str) -> SinkProgress:
    """The sink's progress as committed (a pending commit is waited for, by retrying)."""
    group = sink_group(sink_id)
    keys = [BATCH_ID_KEY, *QUERY_ID_KEYS]
    found = retried(lambda: broker.fetch_offsets(group, keys), f"fetch {group} progress")
    words = tuple(found.get(key, NO_OFFSET) for key in QUERY_ID_KEYS)
    return SinkProgress(found.get(BATCH_ID_KEY, NO_BATCH), query_id_of_words(words))


def progress_offsets(batch_id: int, query_id: str) -> dict[TopicPartition, int]:
    return {
        BATCH_ID_KEY: batch_id,
        **dict(zip(QUERY_ID_KEYS, query_id_words(query_id), strict=True)),
    }
