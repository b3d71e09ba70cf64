"""Exactly-once streaming sink: each micro-batch is one transaction, and a replay writes nothing.

Where each step runs, per micro-batch (PySpark 4.3, checked by the tests):

    driver, planning worker  DataSource.streamWriter() builds a writer, and Spark
                             pickles it to ship it to this micro-batch's tasks.
                             Pickling (``__getstate__``) is when the topic option is
                             checked and the transaction is begun: it is the one
                             moment on the driver, per micro-batch, before any of
                             its tasks runs. (The commit worker builds its own
                             writer and never pickles it, so it begins nothing.)
    each task attempt        write(): produce rows tagged with the attempt, return
                             a MicroBatchReport carrying the ticket and Spark's
                             query id (a task-local property; the driver's Python
                             workers are not given it)
    driver, commit worker    commit(reports, batchId): if the broker's stored
                             progress (sink_progress) is this query's and its batch
                             id is >= batchId, this is a replay: abort. Else send
                             batchId and the query id as group offsets of
                             "spark-sink:<sinkId>" into the transaction, then
                             commit it with the reported attempts.

Progress stored by another query id (the checkpoint was deleted or replaced:
Spark numbers micro-batches from 0 again) is not this query's history: the
sink starts fresh and says so at INFO, rather than dropping new micro-batches
as replays.

The producer's transactional id is "spark-sink:<sinkId>", the same for every
micro-batch of the query, in every run: beginning a micro-batch re-initialises
it, which bumps its generation, fences every task of earlier micro-batches and
earlier runs (a zombie's produce is refused) and aborts a transaction left open
by a crash. So ``sinkId`` (default: derived from ``checkpointLocation``) must
name one query: two running queries with one sinkId fence each other.

A micro-batch with no tasks writes nothing and commits nothing; its open
transaction is aborted when the next micro-batch re-initialises the producer
(or by the broker's timeout).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from twinlog.connectors.spark.broker import check_write_topic, connect, retried
from twinlog.connectors.spark.errors import OptionError
from twinlog.connectors.spark.sink_progress import (
    NO_BATCH,
    progress_offsets,
    sink_group,
    stored_progress,
)
from twinlog.connectors.spark.task_sender import TaskSender
from twinlog.connectors.spark.transaction import (
    AttemptReport,
    TransactionTicket,
    abort_quietly,
    commit_attempts,
    reports_of,
    task_attempt,
)
from twinlog.connectors.spark.write_settings import WriteSettings

if TYPE_CHECKING:
    import pyarrow

log = logging.getLogger("twinlog.spark")

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark's MicroBatchExecution on every task
# StreamingQuery.id: kept in the checkpoint (its metadata file), so the same across restarts
# from it and new after a checkpoint reset. Set by Spark's StreamExecution on every task.
QUERY_ID_PROPERTY = "sql.streaming.queryId"


def streaming_query_id() -> str:
    """The persistent id of the streaming query this task belongs to."""
    from pyspark import TaskContext

    context = TaskContext.get()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
    if not query_id:
        raise RuntimeError(
            f"a twinlog streaming write task found no {QUERY_ID_PROPERTY} property; the sink "
            "needs Spark's query id to tell a replayed micro-batch from a new query's. Run it "
            "as a micro-batch query (writeStream...start()) on PySpark 4.3"
        )
    return query_id


class MicroBatchReport(AttemptReport):
    """A streaming task's commit message: its attempt's report, plus the query it ran in."""

    def __init__(self, report: AttemptReport, query_id: str) -> None:
        super().__init__(report.ticket, report.attempt, report.records, report.batches)
        self.query_id = query_id


class TwinlogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, settings: WriteSettings) -> None:
        if settings.sink_id is None:
            raise OptionError(
                "sinkId",
                "is required for a streaming write without checkpointLocation: name the query "
                "(a stable id the sink keeps its committed micro-batch under), or set "
                "checkpointLocation",
            )
        self.settings = settings
        self.sink_id: str = settings.sink_id
        self.ticket: TransactionTicket | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark is shipping this writer to a micro-batch's tasks: begin its transaction
        # (once: Spark pickles it more than once per micro-batch).
        if self.ticket is None:
            broker = connect(self.settings.connection)
            try:
                check_write_topic(broker, self.settings.connection, self.settings.topic)
                self.ticket = TransactionTicket.begin(
                    broker, f"spark-sink:{self.sink_id}", self.settings.transaction_timeout_ms
                )
            finally:
                broker.close()
        return dict(self.__dict__)

    def write(self, iterator: Iterator[pyarrow.RecordBatch]) -> MicroBatchReport:
        from pyspark import TaskContext

        assert self.ticket is not None, "the writer reached a task without a transaction"
        context = TaskContext.get()
        batch_text = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        query_id = streaming_query_id()
        broker = connect(self.settings.connection)
        try:
            with TaskSender(
                broker,
                self.settings,
                self.ticket,
                task_attempt(),
                context.partitionId() if context else 0,
            ) as sender:
                committed = stored_progress(broker, self.sink_id).last_committed_by(query_id)
                if batch_text is not None and int(batch_text) <= committed:
                    # A replay of a committed micro-batch: its commit will abort; skip the work.
                    for _ in iterator:
                        pass
                else:
                    sender.send_arrow(iterator)
                return MicroBatchReport(sender.finish(), query_id)
        finally:
            broker.close()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        reports = reports_of(messages)
        if not reports:
            log.info(
                "sink %s: micro-batch %d had no tasks; nothing to commit", self.sink_id, batchId
            )
            return
        ticket = reports[0].ticket
        assert all(r.ticket == ticket for r in reports), "one micro-batch, one transaction"
        query_ids = {r.query_id if isinstance(r, MicroBatchReport) else None for r in reports}
        assert len(query_ids) == 1 and None not in query_ids, f"one query: {query_ids}"
        (query_id,) = query_ids
        assert query_id is not None
        broker = connect(self.settings.connection)
        try:
            progress = stored_progress(broker, self.sink_id)
            last = progress.last_committed_by(query_id)
            if progress.batch_id != NO_BATCH and last == NO_BATCH:
                # Batch ids restart at 0 with a new checkpoint: another query's progress says
                # nothing about which of this query's micro-batches were committed.
                log.info(
                    "sink %s: the broker holds micro-batch %d of query %s; this is query %s "
                    "(its checkpoint was deleted or replaced), so the sink starts fresh with "
                    "micro-batch %d",
                    self.sink_id,
                    progress.batch_id,
                    progress.query_id or "(not recorded)",
                    query_id,
                    batchId,
                )
            if batchId <= last:
                log.info(
                    "sink %s: micro-batch %d of query %s was committed before (last committed: "
                    "%d); Spark replays it after a crash before its checkpoint, and the replay "
                    "is not written again",
                    self.sink_id,
                    batchId,
                    query_id,
                    last,
                )
                abort_quietly(broker, ticket, f"sink {self.sink_id} replay of {batchId}")
                return
            group = sink_group(self.sink_id)
            retried(
                lambda: broker.send_offsets_to_transaction(
                    ticket.transaction_id,
                    ticket.producer_id,
                    ticket.producer_generation,
                    group,
                    progress_offsets(batchId, query_id),
                ),
                f"record micro-batch {batchId} in {group}",
            )
            commit_attempts(
                broker,
                ticket,
                [r.attempt for r in reports],
                f"sink {self.sink_id} micro-batch {batchId}",
            )
        finally:
            broker.close()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        reports = reports_of(messages)
        if not reports:
            return  # the next micro-batch's begin aborts it (it fences this generation)
        broker = connect(self.settings.connection)
        try:
            abort_quietly(broker, reports[0].ticket, f"sink {self.sink_id} micro-batch {batchId}")
        finally:
            broker.close()
