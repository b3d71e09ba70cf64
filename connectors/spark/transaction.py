"""The transaction a write job (or micro-batch) runs in, and what a task reports about its part.

    driver   TransactionTicket.begin()   init_producer(unique transactional id) + begin
             ... the ticket travels to every task inside the pickled writer ...
    task     produce(batch, attempt=TaskAttempt.current())   -> AttemptReport (commit message)
    driver   commit_attempts(ticket, reports)   commit_transaction(attempts=[report.attempt...])

The broker tags every journaled batch with its task attempt and, at commit,
applies only the batches of the attempts named; batches of failed, retried,
speculative or zombie attempts are dropped (and the commit, attempt list
included, is journaled, so a broker crash applies the same set). Spark hands
the driver exactly one commit message per successful task, so the set named is
exactly the data of the job's output.

Nothing here lives in memory between processes: Spark runs the driver's
commit in a Python process of its own, which gets the ticket from the pickled
writer and the attempts from the commit messages.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from twinlog.connectors.spark.broker import retried
from twinlog.engine.base.errors import InvalidTxnStateError, TwinlogError, UnknownTransactionError
from twinlog.engine.base.types import TransactionState
from twinlog.rpc.wire.broker_api import BrokerApi

log = logging.getLogger("twinlog.spark")

REQUEST_ID_BITS = 62  # a positive int64 (the proto's request_id)


@dataclass(frozen=True)
class TransactionTicket:
    """Everything a task or the commit needs to act in the transaction: plain numbers."""

    transactional_id: str
    producer_id: int
    producer_generation: int
    transaction_id: int

    @classmethod
    def begin(cls, broker: BrokerApi, transactional_id: str, timeout_ms: int) -> TransactionTicket:
        identity = retried(
            lambda: broker.init_producer(transactional_id, timeout_ms),
            f"init producer {transactional_id}",
        )
        # A retried begin with the same request id gets the same transaction back. The id is
        # fresh per begin: the broker remembers a producer's last one across generations.
        request_id = secrets.randbits(REQUEST_ID_BITS) or 1
        transaction_id = retried(
            lambda: broker.begin_transaction(
                identity.producer_id, identity.producer_generation, request_id
            ),
            f"begin transaction of {transactional_id}",
        )
        ticket = cls(
            transactional_id, identity.producer_id, identity.producer_generation, transaction_id
        )
        log.info("began %s", ticket)
        return ticket

    def __str__(self) -> str:
        return (
            f"transaction {self.transaction_id} of {self.transactional_id} (producer "
            f"{self.producer_id}, generation {self.producer_generation})"
        )


def job_transactional_id(kind: str) -> str:
    """A fresh transactional id: each job is its own producer, so jobs never fence each other."""
    return f"spark-{kind}-{uuid.uuid4().hex}"


def task_attempt() -> str:
    """This task attempt's tag: unique in the Spark application (taskAttemptId is)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("a twinlog writer's write() must run inside a Spark task")
    return f"p{context.partitionId()}-a{context.attemptNumber()}-t{context.taskAttemptId()}"


class AttemptReport(WriterCommitMessage):
    """A task's commit message: which attempt wrote, into which transaction, how much."""

    def __init__(self, ticket: TransactionTicket, attempt: str, records: int, batches: int) -> None:
        self.ticket = ticket
        self.attempt = attempt
        self.records = records
        self.batches = batches

    def __repr__(self) -> str:
        return f"AttemptReport({self.attempt}: {self.records} records in {self.batches} batches)"


def reports_of(messages: Iterable[WriterCommitMessage | None]) -> list[AttemptReport]:
    return [m for m in messages if isinstance(m, AttemptReport)]


def commit_attempts(
    broker: BrokerApi, ticket: TransactionTicket, attempts: Sequence[str], what: str
) -> None:
    """Commit, applying only ``attempts``' batches, and wait until readers can see them."""
    try:
        retried(
            lambda: broker.commit_transaction(
                ticket.transaction_id,
                ticket.producer_id,
                ticket.producer_generation,
                wait_for_applied=True,
                attempts=list(attempts),
            ),
            f"commit {ticket}",
        )
    except (InvalidTxnStateError, UnknownTransactionError) as error:
        raise InvalidTxnStateError(
            f"{what}: could not commit {ticket}: {error}. If the job ran longer than its "
            "transaction timeout, the broker aborted it: raise transactionTimeoutMs (at most the "
            "broker's transaction_timeout_ms_max) or write less per job"
        ) from error
    log.info("%s: committed %s with %d task attempts", what, ticket, len(attempts))


COMMITTED_STATES = (TransactionState.COMMITTED, TransactionState.PREPARE_COMMIT)


def _says_committed(error: InvalidTxnStateError) -> bool:
    """Whether the broker refused an abort because the transaction committed (or is committing).

    The broker's state errors name the state ("cannot abort transaction 7: it is
    COMMITTED; ..."); the state is not a field of the error, so it is read from the text.
    """
    text = str(error)
    return any(f"it is {state.value}" in text for state in COMMITTED_STATES)


def abort_quietly(broker: BrokerApi, ticket: TransactionTicket, what: str) -> None:
    """Abort, and if that fails, log what is known of the rows instead of raising.

    Spark calls abort after a failure it is already reporting; raising here would
    hide that failure. A transaction already aborted (its timeout, a newer
    generation of its producer) answers the abort with success. The abort fails
    when the transaction committed, e.g. the commit reached the broker but every
    answer to it was lost: then the rows are visible although the job failed.
    """
    try:
        retried(
            lambda: broker.abort_transaction(
                ticket.transaction_id, ticket.producer_id, ticket.producer_generation
            ),
            f"abort {ticket}",
        )
    except InvalidTxnStateError as error:
        if _says_committed(error):
            log.error(
                "%s: could not abort %s: the broker answered %s. Its rows ARE committed: "
                "readers see them (or will, once the broker has applied the commit), though "
                "Spark reports this write as failed; do not write them again",
                what,
                ticket,
                error,
            )
        else:
            _log_outcome_unknown(what, ticket, error)
        return
    except TwinlogError as error:
        _log_outcome_unknown(what, ticket, error)
        return
    log.info("%s: aborted %s; none of its rows is visible", what, ticket)


def _log_outcome_unknown(what: str, ticket: TransactionTicket, error: TwinlogError) -> None:
    log.error(
        "%s: could not abort %s: the broker answered %s. Its rows may be committed (if a "
        "commit reached the broker first): read the target topic to check (e.g. twinlog "
        "consume TOPIC --from-beginning). If `twinlog txn list` still shows transaction %d, "
        "it is open and the broker aborts it at its timeout; abort it now with `twinlog txn "
        "abort %d`",
        what,
        ticket,
        error,
        ticket.transaction_id,
        ticket.transaction_id,
    )
