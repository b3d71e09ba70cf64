"""A producer's transactional state: its phase, its identity, its open transaction.

The phase follows ``VALID_TRANSITIONS``; every change goes through
``TransactionManager.transition_to``, which refuses a pair the table does not list.
The producer asks the manager before acting (``require_...``: raise what the user
should see; ``can_...``/``is_...``: decide) and tells it what happened (``initialised``,
``began``, ``ended``, ``fenced``, ``send_failed``, ``call_failed``).

Errors decide by their flags (``twinlog.engine.base.errors``): a fatal error moves the
producer to FATAL, any other error that failed a send of the open transaction, and an
abortable error of a transaction call, to ABORTABLE. The manager's own refusals of a
call made out of order change nothing, and say so: they are neither abortable nor fatal.

An idempotent (non-transactional) producer has a manager too: it starts READY, and
only a fencing error moves it (to FATAL).

Thread rule: every method is called with the producer's lock held.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import Enum

from twinlog.engine.base.errors import InvalidTxnStateError, TwinlogError
from twinlog.engine.base.types import ProducerIdentity, TopicPartition
from twinlog.engine.records.batch_format import NO_TRANSACTION_ID


class TxnPhase(Enum):
    UNINITIALISED = "uninitialised"  # transactional, init_transactions() not called yet
    READY = "ready"  # no transaction open
    IN_TRANSACTION = "in transaction"
    ABORTABLE = "abortable"  # a send failed; the transaction can only be aborted
    FATAL = "fatal"  # fenced; close the producer

    # Members are singletons compared by identity, so the identity hash agrees with
    # equality; Enum's own hashes the name in Python, on every send() (``in FAILED_PHASES``).
    __hash__ = object.__hash__


# Which phase may follow which. init_transactions() may be called again in any phase
# after the first: the broker then bumps the generation and aborts whatever the older
# one had open, so every initialised phase may go back to READY.
VALID_TRANSITIONS: Mapping[TxnPhase, frozenset[TxnPhase]] = {
    TxnPhase.UNINITIALISED: frozenset({TxnPhase.READY}),  # init_transactions()
    TxnPhase.READY: frozenset(
        {
            TxnPhase.READY,  # init_transactions() again
            TxnPhase.IN_TRANSACTION,  # begin_transaction()
            TxnPhase.FATAL,  # fenced (an idempotent producer's send, or a stray answer)
        }
    ),
    TxnPhase.IN_TRANSACTION: frozenset(
        {
            TxnPhase.READY,  # committed, aborted, or init_transactions() again
            TxnPhase.ABORTABLE,  # a send of the transaction failed for good
            TxnPhase.FATAL,  # fenced
        }
    ),
    TxnPhase.ABORTABLE: frozenset(
        {
            TxnPhase.READY,  # aborted, or init_transactions() again
            TxnPhase.FATAL,  # fenced
        }
    ),
    TxnPhase.FATAL: frozenset(
        {
            TxnPhase.READY,  # init_transactions() again: a new generation
            TxnPhase.FATAL,  # fenced once more: the latest error is the one raised
        }
    ),
}

# The phases that hold the error that put the producer there.
FAILED_PHASES = frozenset({TxnPhase.ABORTABLE, TxnPhase.FATAL})
OPEN_PHASES = frozenset({TxnPhase.IN_TRANSACTION, TxnPhase.ABORTABLE})


def is_transition_valid(source: TxnPhase, target: TxnPhase) -> bool:
    return target in VALID_TRANSITIONS[source]


def out_of_order(message: str) -> InvalidTxnStateError:
    """A call the phase does not allow; refused before any request, so nothing changed
    (not abortable, as the server's InvalidTxnStateError about a transaction is)."""
    return InvalidTxnStateError(message).classify()


class TransactionManager:
    def __init__(self, transactional_id: str | None) -> None:
        self.transactional_id = transactional_id
        self.phase = TxnPhase.UNINITIALISED if transactional_id else TxnPhase.READY
        self.failure: TwinlogError | None = None  # why the phase is ABORTABLE or FATAL
        self.transaction_id = NO_TRANSACTION_ID
        # Set by init_transactions(); an idempotent producer's is fetched on first send
        # and dropped when its sequences break.
        self.identity: ProducerIdentity | None = None
        # The open transaction's batches the broker said are written, per partition: its
        # commit names them, and the coordinator refuses it if a journal holds fewer.
        # Each is one journal entry (a retry of a written batch is a duplicate, not an entry).
        self.batches_written: dict[TopicPartition, int] = {}

    # --- the one transition --------------------------------------------------------------

    def transition_to(
        self, target: TxnPhase, failure: TwinlogError | None = None, what: str | None = None
    ) -> None:
        """Move to ``target``; ``failure`` is the error for ABORTABLE and FATAL.

        Raises, leaving the phase as it was, when the table has no such transition: the
        error the user gets for asking ``what`` now (see ``require_transition``).
        """
        self.require_transition(target, what or f"becoming {target.value}")
        if (target in FAILED_PHASES) != (failure is not None):
            raise ValueError(f"{target.value} needs its error, and only it: got {failure!r}")
        self.phase, self.failure = target, failure

    def require_transition(self, target: TxnPhase, what: str) -> None:
        """Raise, unless ``what`` (which leads to ``target``) may happen in this phase."""
        if is_transition_valid(self.phase, target):
            return
        if self.phase is TxnPhase.FATAL:
            raise self._failure()  # fenced: every later call raises it
        if self.phase is TxnPhase.UNINITIALISED:
            raise out_of_order(f"call init_transactions() before {what}")
        if target is TxnPhase.IN_TRANSACTION:
            raise out_of_order(
                f"{what} while {self.phase.value}: commit or abort "
                f"transaction {self.transaction_id} first"
            )
        raise out_of_order(
            f"{what} while {self.phase.value}: a producer that is {self.phase.value} "
            f"cannot become {target.value}"
        )

    # --- what happened ---------------------------------------------------------------------

    def initialised(self, identity: ProducerIdentity) -> None:
        self.identity = identity
        self.transition_to(TxnPhase.READY, what="init_transactions()")

    def began(self, transaction_id: int) -> None:
        self.transition_to(TxnPhase.IN_TRANSACTION, what="begin_transaction()")
        self.transaction_id = transaction_id
        self.batches_written = {}

    def ended(self) -> None:
        """The open transaction was committed or aborted."""
        self.transition_to(TxnPhase.READY, what="ending the transaction")
        self.transaction_id = NO_TRANSACTION_ID
        self.batches_written = {}

    def batch_written(self, transaction_id: int, topic_partition: TopicPartition) -> None:
        """A batch of transaction ``transaction_id`` was written (an answer for an earlier
        transaction, arriving late, counts for none)."""
        if transaction_id == self.transaction_id:
            self.batches_written[topic_partition] = self.batches_written.get(topic_partition, 0) + 1

    def fenced(self, error: TwinlogError) -> None:
        self.transition_to(TxnPhase.FATAL, error, what="a fenced request")

    def send_failed(self, error: TwinlogError) -> None:
        """A send of the open transaction failed for good: only an abort can follow
        (the error says so: abortable), unless the error is fatal (FATAL).

        A failure outside a transaction (an answer arriving after an abort, or after
        init_transactions() again) changes nothing.
        """
        if self.phase is not TxnPhase.IN_TRANSACTION:
            return
        if error.fatal:
            self.fenced(error)
            return
        # Whatever its class (a timeout, a refused batch): the transaction lost a record.
        error.classify(abortable=True)
        self.transition_to(TxnPhase.ABORTABLE, error, what="a failed send")

    def call_failed(self, error: TwinlogError) -> None:
        """A transaction call (begin, send offsets, commit, abort) failed: a fatal error
        ends this generation, an abortable one the open transaction; others change nothing
        (a retriable error's call may be made again)."""
        if error.fatal:
            self.fenced(error)
        elif error.abortable and self.phase is TxnPhase.IN_TRANSACTION:
            self.transition_to(TxnPhase.ABORTABLE, error, what="a failed transaction call")

    def forget_identity(self) -> None:
        """The idempotent producer's sequences broke: the next send takes a new id."""
        self.identity = None

    # --- questions -----------------------------------------------------------------------------

    @property
    def is_transactional(self) -> bool:
        return bool(self.transactional_id)

    def require_transactional_id(self, what: str) -> None:
        if not self.transactional_id:
            raise out_of_order(
                f"{what} needs a transactional producer: pass transactional_id= to Producer()"
            )

    def require_transactional(self, what: str) -> ProducerIdentity:
        """The identity to call the broker with, for a transaction call ``what``."""
        self.require_transactional_id(what)
        if self.phase is TxnPhase.FATAL:
            raise self._failure()
        if self.identity is None or self.phase is TxnPhase.UNINITIALISED:
            raise out_of_order(f"call init_transactions() before {what}")
        return self.identity

    def require_phase(self, what: str, phases: Collection[TxnPhase], hint: str) -> None:
        if self.phase not in phases:
            raise out_of_order(f"{what} while {self.phase.value}; {hint}")

    def require_can_send(self) -> int:
        """The transaction id a record sent now belongs to (NO_TRANSACTION_ID if none)."""
        if self.phase in FAILED_PHASES:
            raise self._failure()
        if self.transactional_id and self.phase is not TxnPhase.IN_TRANSACTION:
            raise out_of_order(
                f"transactional producer {self.transactional_id!r} is {self.phase.value}: "
                "call begin_transaction() before send()"
                + (
                    " (and init_transactions() first)"
                    if self.phase is TxnPhase.UNINITIALISED
                    else ""
                )
            )
        return self.transaction_id

    def require_no_failure(self) -> None:
        """Raise the error of a failed send (ABORTABLE) or of fencing (FATAL)."""
        if self.phase in FAILED_PHASES:
            raise self._failure()

    def can_retry_sends(self) -> bool:
        """A retriable send error is retried, unless the producer is fenced."""
        return self.phase is not TxnPhase.FATAL

    def needs_abort(self) -> bool:
        """A send failed: abort_transaction() is the only way out of the transaction."""
        return self.phase is TxnPhase.ABORTABLE

    def has_open_transaction(self) -> bool:
        return self.phase in OPEN_PHASES

    def _failure(self) -> TwinlogError:
        assert self.failure is not None  # FAILED_PHASES are entered with their error
        return self.failure
