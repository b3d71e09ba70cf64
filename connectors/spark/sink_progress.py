"""The streaming sink's progress: the last micro-batch id committed, kept in the broker.

It is stored as a group offset, so it commits atomically with the batch's rows:

    group      "spark-sink:<sinkId>"
    key        TopicPartition("__batch_id__", 0)   (a name no topic can take as a
               real partition of this group: the sink's group commits nothing else)
    "offset"   the micro-batch id

The micro-batch's transaction sends it with ``send_offsets_to_transaction``
before the commit. If Spark crashes after the commit but before its own
checkpoint, it replays the batch with the same id; the sink reads the stored id
and, finding it >= the replayed one, aborts instead of writing twice.

While a transaction holding this offset is being committed, fetching it
answers PendingTransactionError (retriable), never a stale id: the read is
retried until the commit is applied.
"""

from __future__ import annotations

from connectors.spark.broker import retried
from engine.types import TopicPartition
from rpc.broker_api import BrokerApi

BATCH_ID_KEY = TopicPartition("__batch_id__", 0)
NO_BATCH = -1


def sink_group(sink_id: str) -> str:
    return f"spark-sink:{sink_id}"


def last_committed_batch(broker: BrokerApi, sink_id: str) -> int:
    """The last committed micro-batch id of the sink, -1 if none yet."""
    group = sink_group(sink_id)
    found = retried(lambda: broker.fetch_offsets(group, [BATCH_ID_KEY]), f"fetch {group} progress")
    return found.get(BATCH_ID_KEY, NO_BATCH)


def progress_offsets(batch_id: int) -> dict[TopicPartition, int]:
    return {BATCH_ID_KEY: batch_id}
