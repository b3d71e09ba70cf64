"""Typed errors of twinlog.

Every error the engine raises on purpose is a subclass of ``TwinlogError``.
Each class says whether it is ``retriable``: a caller (and the gRPC layer,
which maps them to status codes in one table) needs no list of its own.
Messages say what was wrong and, where there is one, what to do about it.

``assert`` is kept for our own invariants; bytes read from disk or the
network are validated and raise one of these instead.
"""

from __future__ import annotations


class TwinlogError(Exception):
    """Base of every twinlog error. ``retriable``: may the same call succeed later?"""

    retriable: bool = False


# --- bytes -----------------------------------------------------------------


class CorruptBatchError(TwinlogError):
    """A record batch failed validation (length, CRC, codec, varint, ...).

    The message names what was expected and what was found. ``position`` is the
    byte position of the batch in its file when known (None for bytes from the
    network).
    """

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class InvalidRecordError(CorruptBatchError):
    """A batch whose CRC holds carries a record that is not well formed (Kafka's
    InvalidRecordException): a count that disagrees with the records, offset deltas that do
    not climb, lengths that do not add up, a header key that is not UTF-8, trailing bytes.

    Not retriable: the same bytes fail again. The producer refused at the door must build
    its batches with a record batch builder; a reader that meets such a batch in old data
    may seek to ``next_offset`` to skip it. ``topic``, ``partition``, ``offset`` (the
    batch's base offset, or None at the door) and ``record_index`` name where it is.
    """

    def __init__(
        self,
        message: str,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        record_index: int | None = None,
        next_offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.record_index = record_index
        self.next_offset = next_offset


class CorruptLogError(TwinlogError):
    """A data log holds a bad batch followed by good ones (not a torn tail).

    The log refuses to serve past ``position`` of ``path``; an operator must
    decide (restore the segment, or truncate it by hand after copying it aside).
    """

    def __init__(self, message: str, path: str, position: int) -> None:
        super().__init__(message)
        self.path = path
        self.position = position


class CorruptJournalError(TwinlogError):
    """The local data journal (LMDB) or the transaction journal is damaged."""


class BatchTooLargeError(TwinlogError):
    """A batch (or request) is larger than the configured maximum."""


class RecordTooLargeError(BatchTooLargeError):
    """One record is larger than any batch may be (Kafka's RecordTooLargeException).

    Raised by the producer before the record is queued; splitting batches cannot help.
    """


# --- offsets and topics ----------------------------------------------------


class OffsetOutOfRangeError(TwinlogError):
    """The requested offset is below the log start or above the log end."""

    def __init__(self, message: str, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnknownTopicOrPartitionError(TwinlogError):
    """No such topic or partition. Create the topic first (``twinlog topics create``)."""


class TopicExistsError(TwinlogError):
    """A topic of that name exists already."""


class InvalidConfigError(TwinlogError):
    """A configuration key or value is not valid; the message names the key."""


class LogClosedError(TwinlogError):
    """The log (or broker) was closed; reopen it."""


# --- producers and transactions --------------------------------------------


class ProducerFencedError(TwinlogError):
    """A newer generation of this transactional id exists; this producer is a zombie.

    Not retriable: close the producer; its open transaction was aborted.
    """


class InvalidTxnStateError(TwinlogError):
    """The transaction is not in a state that allows this request."""


class UnknownTransactionError(TwinlogError):
    """No transaction with that id is known (never begun, or long finished)."""


class UnknownProducerIdError(TwinlogError):
    """The producer id is not known to the coordinator; call init_producer (init_transactions) first."""


class OutOfOrderSequenceError(TwinlogError):
    """A batch's sequence number leaves a gap after the last one this partition accepted."""


class DuplicateSequenceError(TwinlogError):
    """A batch repeats a sequence number already written (a retry); it was not written again."""


class PendingTransactionError(TwinlogError):
    """Group offsets are part of a transaction that is being committed; retry shortly."""

    retriable = True


class ConcurrentTransactionsError(TwinlogError):
    """The previous transaction of this producer is still being completed; retry shortly."""

    retriable = True


# --- resources ---------------------------------------------------------------


class DiskFullError(TwinlogError):
    """The disk (or the journal's map) is full. Nothing was written; free space and retry."""

    retriable = True


class NotEnoughResourcesError(TwinlogError):
    """A limit (open transactions, memory, ...) was reached; retry later or raise the limit."""

    retriable = True


def all_error_classes() -> list[type[TwinlogError]]:
    """Every error class, base included (for the one table that maps them to gRPC codes)."""
    found: list[type[TwinlogError]] = [TwinlogError]
    for cls in found:
        found.extend(sub for sub in cls.__subclasses__() if sub not in found)
    return found


# --- access and transport (raised by the rpc layer; the embedded engine never does) ---


class AuthenticationError(TwinlogError):
    """The request carried no valid bearer token; pass ``token=`` (``--token``) with a known token."""


class AuthorizationError(TwinlogError):
    """The principal may not do this (topic read/write, or administration); nothing was changed."""


class BrokerUnavailableError(TwinlogError):
    """The broker could not be reached (not running, wrong address, TLS mismatch); retry later."""

    retriable = True


class RequestTimedOutError(TwinlogError):
    """The request did not complete within its deadline; its outcome is unknown. Retry it."""

    retriable = True


# --- local data journal (added by the journal/copier work, issue 3) ------------


class TransactionCompletedError(InvalidTxnStateError):
    """The transaction is already applied or aborted on this partition (or is below the
    journal's purge watermark): the batch arrived after its end and was not journaled.

    Not retriable: the producer's transaction is over; begin a new one.
    """


class TransactionDataMissingError(InvalidTxnStateError):
    """A commit found a partition that was written to holding no journaled batches (the broker
    stopped before they were journaled, or the local journal was damaged). Nothing was
    committed.

    Not retriable: abort the transaction and send its records again.
    """
