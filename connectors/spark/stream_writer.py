"""Exactly-once streaming sink: each micro-batch is one transaction, and a replay writes nothing.

Where each step runs, per micro-batch (PySpark 4.3, checked by the tests):

    driver, planning worker  DataSource.streamWriter() builds a writer, and Spark
                             pickles it to ship it to this micro-batch's tasks.
                             Pickling (``__getstate__``) is when the transaction
                             is begun: it is the one moment on the driver, per
                             micro-batch, before any of its tasks runs. (The
                             commit worker builds its own writer and never
                             pickles it, so it begins nothing.)
    each task attempt        write(): produce rows tagged with the attempt, return
                             an AttemptReport carrying the ticket
    driver, commit worker    commit(reports, batchId): if the broker's stored batch
                             id (sink_progress) is >= batchId, this is a replay:
                             abort. Else send batchId as the group offset of
                             "spark-sink:<sinkId>" into the transaction, then commit
                             it with the reported attempts.

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

from connectors.spark.broker import connect, retried
from connectors.spark.errors import OptionError
from connectors.spark.sink_progress import last_committed_batch, progress_offsets, sink_group
from connectors.spark.task_sender import TaskSender
from connectors.spark.transaction import (
    AttemptReport,
    TransactionTicket,
    abort_quietly,
    commit_attempts,
    reports_of,
    task_attempt,
)
from connectors.spark.write_settings import WriteSettings

if TYPE_CHECKING:
    import pyarrow

log = logging.getLogger("twinlog.spark")

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark's MicroBatchExecution on every task


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
                self.ticket = TransactionTicket.begin(
                    broker, f"spark-sink:{self.sink_id}", self.settings.transaction_timeout_ms
                )
            finally:
                broker.close()
        return dict(self.__dict__)

    def write(self, iterator: Iterator[pyarrow.RecordBatch]) -> AttemptReport:
        from pyspark import TaskContext

        assert self.ticket is not None, "the writer reached a task without a transaction"
        context = TaskContext.get()
        batch_text = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        broker = connect(self.settings.connection)
        try:
            sender = TaskSender(
                broker,
                self.settings,
                self.ticket,
                task_attempt(),
                context.partitionId() if context else 0,
            )
            if batch_text is not None and int(batch_text) <= last_committed_batch(
                broker, self.sink_id
            ):
                # A replay of a committed micro-batch: its commit will abort; skip the work.
                for _ in iterator:
                    pass
            else:
                sender.send_arrow(iterator)
            return sender.finish()
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
        broker = connect(self.settings.connection)
        try:
            last = last_committed_batch(broker, self.sink_id)
            if batchId <= last:
                log.warning(
                    "sink %s: micro-batch %d was committed before (last committed: %d); this "
                    "replay is dropped",
                    self.sink_id,
                    batchId,
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
                    progress_offsets(batchId),
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
