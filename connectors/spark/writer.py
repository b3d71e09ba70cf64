"""Exactly-once batch write: ``df.write.format("twinlog")...save()`` is one transaction.

Where each step runs (PySpark 4.3; each bullet is a different Python process):

    driver, planning worker  DataSource.writer(): check the columns and that the
                             topic option names a topic, init a producer with a
                             fresh transactional id, begin the transaction; the
                             writer (holding the ticket) is pickled for the rest
    each task attempt        write(): produce its rows into the transaction, every
                             batch tagged with the attempt ("p3-a1-t57"); return an
                             AttemptReport naming the attempt
    driver, commit worker    commit(reports): commit the transaction with exactly the
                             reported attempts (wait until applied);
                             abort(...): abort it

A task attempt that fails, is retried, or loses a speculation race never has
its report reach ``commit``, so its batches are dropped by the broker at
commit: the job's rows appear once, or (abort, a crash, the transaction timing
out) not at all. All or nothing once applied, not all at one instant: the
broker applies a commit partition by partition, as Kafka writes a transaction's
markers, so a reader running meanwhile may briefly see some partitions' rows
and not yet others'. ``commit`` returns once every partition is applied.
Spark's own Kafka sink is at-least-once.

A job that dies before commit or abort leaves its transaction open until the
broker's timeout (``transactionTimeoutMs``, at most 15 minutes) aborts it;
nothing of it is visible meanwhile. A job that runs longer than that timeout
cannot commit: the broker has aborted it (``commit_attempts`` says so). The
transactional id is unique per job, so the broker keeps one small producer
entry per write job (it does not expire them yet).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from twinlog.connectors.spark.broker import check_write_topic, connect
from twinlog.connectors.spark.task_sender import TaskSender
from twinlog.connectors.spark.transaction import (
    AttemptReport,
    TransactionTicket,
    abort_quietly,
    commit_attempts,
    job_transactional_id,
    reports_of,
    task_attempt,
)
from twinlog.connectors.spark.write_settings import WriteSettings

if TYPE_CHECKING:
    import pyarrow

log = logging.getLogger("twinlog.spark")


class TwinlogBatchWriter(DataSourceArrowWriter):
    """Made on the driver (``begin``), pickled to tasks and to the commit worker."""

    def __init__(self, settings: WriteSettings, ticket: TransactionTicket) -> None:
        self.settings = settings
        self.ticket = ticket

    @classmethod
    def begin(cls, settings: WriteSettings) -> TwinlogBatchWriter:
        broker = connect(settings.connection)
        try:
            check_write_topic(broker, settings.connection, settings.topic)
            ticket = TransactionTicket.begin(
                broker, job_transactional_id("write"), settings.transaction_timeout_ms
            )
        finally:
            broker.close()
        return cls(settings, ticket)

    def write(self, iterator: Iterator[pyarrow.RecordBatch]) -> AttemptReport:
        from pyspark import TaskContext

        context = TaskContext.get()
        broker = connect(self.settings.connection)
        try:
            with TaskSender(
                broker,
                self.settings,
                self.ticket,
                task_attempt(),
                context.partitionId() if context else 0,
            ) as sender:
                sender.send_arrow(iterator)
                return sender.finish()
        finally:
            broker.close()

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        reports = reports_of(messages)
        foreign = [r for r in reports if r.ticket != self.ticket]
        assert not foreign, f"reports of another transaction: {foreign}"
        broker = connect(self.settings.connection)
        try:
            commit_attempts(broker, self.ticket, [r.attempt for r in reports], "write job")
        finally:
            broker.close()
        log.info(
            "write job: %d records in %d batches from %d tasks committed",
            sum(r.records for r in reports),
            sum(r.batches for r in reports),
            len(reports),
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        broker = connect(self.settings.connection)
        try:
            abort_quietly(broker, self.ticket, "write job")
        finally:
            broker.close()
