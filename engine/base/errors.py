"""Typed errors of twinlog.

Every error the engine raises on purpose is a subclass of ``TwinlogError``.
Each class says what a caller should do about it, with three flags as Kafka's
clients have them (at most one is true; none means: fix the call, the message
says how):

    retriable   the same call may succeed later: retry it
    abortable   the open transaction cannot commit: abort it, the producer lives
                on (confluent-kafka's ``txn_requires_abort()``)
    fatal       the producer (or client) can do nothing more: close it, or call
                init_transactions() again for a new generation

A caller needs no list of its own; nor do the doors: the one error table,
``rpc/wire/error_table.py``, gives each class its gRPC status and its Kafka code
(the gRPC layer carries the flags too). ``docs/errors.md`` has the table of every
class. An instance may say more than its class (``classify``): an error
that ended a transaction's send is abortable whatever its class.
Messages say what was wrong and, where there is one, what to do about it.

``assert`` is kept for our own invariants; bytes read from disk or the
network are validated and raise one of these instead.
"""

from __future__ import annotations

from typing import Self


class TwinlogError(Exception):
    """Base of every twinlog error.

    ``retriable``: may the same call succeed later? ``abortable``: must the open
    transaction be aborted (the producer lives on)? ``fatal``: must the producer or
    client be closed? At most one is true.
    """

    retriable: bool = False
    abortable: bool = False
    fatal: bool = False

    def classify(
        self, *, retriable: bool = False, abortable: bool = False, fatal: bool = False
    ) -> Self:
        """Set this instance's flags (the class's stay as they are); returns the error.

        For where the context knows more than the class: ``raise
        InvalidTxnStateError(...).classify()`` for a call made out of order that
        changed nothing, ``error.classify(abortable=True)`` for any error that failed a
        send of the open transaction.
        """
        if retriable + abortable + fatal > 1:
            raise ValueError("an error is at most one of retriable, abortable and fatal")
        self.retriable, self.abortable, self.fatal = retriable, abortable, fatal
        return self

    def txn_requires_abort(self) -> bool:
        """``abortable`` under confluent-kafka's name."""
        return self.abortable


# --- bytes -----------------------------------------------------------------


class CorruptBatchError(TwinlogError):
    """A record batch failed validation (length, CRC, codec, varint, ...).

    The message names what was expected and what was found. ``position`` is the
    byte position of the batch in its file when known (None for bytes from the
    network).
    """

    # A produced batch refused: the transaction it belonged to cannot commit whole
    # (Kafka's CorruptRecordException, abortable since KIP-691).
    abortable = True

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


class DataDirFormatError(TwinlogError):
    """A data directory (or a segment in it) was written in a format this twinlog does not
    read, by an older or newer version. Nothing was opened, changed or truncated.

    Not retriable: start with an empty directory, or with the twinlog version that wrote it.
    """


class BatchTooLargeError(TwinlogError):
    """A batch (or request) is larger than the configured maximum."""

    # As Kafka's RecordBatchTooLargeException: the batch is refused, the producer lives.
    abortable = True


class RecordTooLargeError(BatchTooLargeError):
    """One record is larger than any batch may be (Kafka's RecordTooLargeException).

    Raised by the producer before the record is queued; splitting batches cannot help.
    """

    # Raised by send() before the record is queued: the transaction is untouched.
    abortable = False


# --- offsets and topics ----------------------------------------------------


class OffsetOutOfRangeError(TwinlogError):
    """The requested offset is below the log start or above the log end."""

    def __init__(self, message: str, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnknownTopicOrPartitionError(TwinlogError):
    """No such topic or partition. Create the topic first (``twinlog topics create``)."""

    # A send to it failed: its transaction cannot commit whole; the producer lives.
    abortable = True


class TopicExistsError(TwinlogError):
    """A topic of that name exists already."""


class InvalidPartitionsError(TwinlogError):
    """A partition count that cannot be: a topic grows only, up to the limit; the message
    says the count it has and the range allowed."""


class InvalidReplicaAssignmentError(TwinlogError):
    """A partition's replicas that cannot be: empty, a broker twice, or a broker that is
    not registered; the message names the partition and the brokers there are."""


class NoReassignmentInProgressError(TwinlogError):
    """A reassignment cancelled where none runs; the message names the partition."""


class InvalidConfigError(TwinlogError):
    """A configuration key or value is not valid; the message names the key."""


class InvalidRequestError(TwinlogError):
    """A request's fields break the protocol's rules (not its bytes' damage: those are
    CorruptBatchError); the message names the rule. A client bug: nothing was written."""

    fatal = True


class LogClosedError(TwinlogError):
    """The log (or broker) was closed; reopen it."""


# --- producers and transactions --------------------------------------------


class ProducerFencedError(TwinlogError):
    """A newer generation of this transactional id exists; this producer is a zombie.

    Not retriable: close the producer; its open transaction was aborted.
    """

    fatal = True


class InvalidTxnStateError(TwinlogError):
    """The transaction is not in a state that allows this request."""

    # Raised by the server about a transaction that cannot go on (aborted by its timeout,
    # already completing): abort_transaction() is the way out, and the server answers an
    # abort of an aborted transaction with success. The client's own refusals of a call
    # made out of order changed nothing and are classified as neither (``classify()``).
    abortable = True


class UnknownTransactionError(TwinlogError):
    """No transaction with that id is known (never begun, or long finished)."""


class UnknownProducerIdError(TwinlogError):
    """The producer id is not known to the coordinator; call init_producer (init_transactions) first."""

    # The coordinator no longer knows this producer: nothing but init_transactions() helps.
    # An idempotent producer recovers by itself (it takes a new producer id).
    fatal = True


class InvalidProducerGenerationError(TwinlogError):
    """A producer generation outside 0..32767 (Kafka's int16 producerEpoch): no producer
    was ever given it. Not retriable: use the id and generation init_producer() returned."""

    fatal = True


class OutOfOrderSequenceError(TwinlogError):
    """A batch's sequence number leaves a gap after the last one this partition accepted."""

    # As Kafka's transactional producer (KIP-360): the batch failed, abort the transaction.
    # An idempotent producer recovers by itself (it takes a new producer id).
    abortable = True


class DuplicateSequenceError(TwinlogError):
    """A batch repeats a sequence number already written (a retry); it was not written again."""


class PendingTransactionError(TwinlogError):
    """Group offsets are part of a transaction that is being committed; retry shortly."""

    retriable = True


class ConcurrentTransactionsError(TwinlogError):
    """The previous transaction of this producer is still being completed; retry shortly."""

    retriable = True


# --- consumer group membership (Kafka's KIP-848 names) ----------------------


class UnknownMemberIdError(TwinlogError):
    """The group's coordinator knows no such member: it left, its session expired (no
    heartbeat within ``session_timeout_ms``), or the coordinator moved. Nothing changed.

    The consumer has lost its partitions (on-lost) and joins again by itself; a commit or a
    transaction's offsets from it are refused, so the open transaction must abort.
    """

    abortable = True


class FencedMemberEpochError(TwinlogError):
    """A heartbeat carried a member epoch the coordinator does not hold for that member
    (Kafka's FENCED_MEMBER_EPOCH): the member was fenced. It joins again (epoch 0); its
    partitions are lost, not revoked."""

    abortable = True


class StaleMemberEpochError(TwinlogError):
    """An offset commit (plain, or in a transaction) from a group generation older than
    the one in which the committing member was given the partition, or for a partition
    the member does not own (Kafka's STALE_MEMBER_EPOCH, KIP-447's fencing by generation).

    The committer is a zombie for that partition: nothing was committed; abort the open
    transaction. A live consumer commits again after its next poll.
    """

    abortable = True


class FencedInstanceIdError(TwinlogError):
    """Another consumer joined with the same ``group_instance_id`` and replaced this one
    (static membership). Close this consumer: two processes must not share an instance id."""

    fatal = True


class UnreleasedInstanceIdError(TwinlogError):
    """A KIP-848 consumer joined with a ``group.instance.id`` a live member of the group
    still holds (Kafka's UNRELEASED_INSTANCE_ID): two processes must not share an instance
    id. The old one releases it by leaving (closing), or when its session times out."""

    fatal = True


class GroupIdNotFoundError(TwinlogError):
    """No consumer group of that id: it has no members and no committed offsets."""


class NonEmptyGroupError(TwinlogError):
    """The group has active members: stop its consumers first (or wait for their sessions
    to expire), then delete the group or reset its offsets."""


class GroupSubscribedToTopicError(TwinlogError):
    """A member of the group reads the topic whose offsets were to be deleted: stop the
    group's consumers (or let them unsubscribe from it) first."""


class OffsetMetadataTooLargeError(TwinlogError):
    """An offset commit's metadata string is longer than the broker keeps
    (``offset_metadata_max_bytes``, Kafka's offset.metadata.max.bytes): commit a shorter
    one. Nothing of that partition was committed."""


# --- epochs between coordinators and partition leaders (Kafka's names) ------


class TransactionCoordinatorFencedError(TwinlogError):
    """A coordinator call carried an older coordinator epoch than this partition has seen:
    another broker leads the transaction journal partition now (Kafka's
    TRANSACTION_COORDINATOR_FENCED). Nothing was changed.

    Fatal for the caller: a deposed coordinator must stop acting; the new one redoes
    every decision it finds in the journal.
    """

    fatal = True


class FencedLeaderEpochError(TwinlogError):
    """The call expected an older leader epoch than the partition's: the caller's metadata
    is stale (Kafka's FENCED_LEADER_EPOCH). Nothing was changed; refresh and retry."""

    retriable = True


class UnknownLeaderEpochError(TwinlogError):
    """The call expected a newer leader epoch than the partition's: this replica has not
    learnt of its own promotion yet (Kafka's UNKNOWN_LEADER_EPOCH). Nothing was changed;
    retry shortly."""

    retriable = True


# --- replication (Kafka's names; CLUSTER.md §3.8) -----------------------------


class NotLeaderOrFollowerError(TwinlogError):
    """This broker does not lead the partition (any more, or yet): Kafka's
    NOT_LEADER_OR_FOLLOWER. Nothing was written. Refresh metadata and send the request to
    the partition's leader; an idempotent producer's retry is never written twice."""

    retriable = True


class NotCoordinatorError(TwinlogError):
    """This broker is not the transaction coordinator of that transactional id or
    producer id (any more, or yet): Kafka's NOT_COORDINATOR. Nothing was changed. Find the
    coordinator again (``FindCoordinator``) and send the request there."""

    retriable = True


class CoordinatorLoadInProgressError(TwinlogError):
    """This broker has just become the coordinator and is still loading its transaction
    journal (promotion barrier, replay, redo): Kafka's COORDINATOR_LOAD_IN_PROGRESS.
    Nothing was changed; retry shortly at the same broker."""

    retriable = True


class NotEnoughReplicasError(TwinlogError):
    """Fewer in-sync replicas than ``min_insync_replicas`` hold the partition (Kafka's
    NOT_ENOUGH_REPLICAS): the write was refused before anything was appended. Retry once
    the replicas are back; nothing acknowledged is lost meanwhile."""

    retriable = True


class NotEnoughReplicasAfterAppendError(TwinlogError):
    """The leader appended the batch, but the in-sync replicas did not all acknowledge it
    in time (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND). It may or may not become readable:
    retry with the same producer id, generation and sequence, which is never written
    twice."""

    retriable = True


# --- resources ---------------------------------------------------------------


class DiskFullError(TwinlogError):
    """The disk (or the journal's map) is full. Nothing was written; free space and retry."""

    retriable = True


class NotEnoughResourcesError(TwinlogError):
    """A limit (open transactions, memory, ...) was reached; retry later or raise the limit."""

    retriable = True


def all_error_classes() -> list[type[TwinlogError]]:
    """Every error class, base included (for the one error table, ``rpc/wire/error_table.py``:
    class, gRPC status, Kafka code)."""
    found: list[type[TwinlogError]] = [TwinlogError]
    for cls in found:
        found.extend(sub for sub in cls.__subclasses__() if sub not in found)
    return found


# --- access and transport (raised by the rpc layer; the embedded engine never does) ---


class AuthenticationError(TwinlogError):
    """The request carried no valid bearer token; pass ``token=`` (``--token``) with a known token."""

    fatal = True


class AuthorizationError(TwinlogError):
    """The principal may not do this (topic read/write, or administration); nothing was changed."""

    # As Kafka's TopicAuthorizationException after KIP-691: the request is refused, the
    # producer lives. (Kafka's TransactionalIdAuthorizationException is fatal; here a
    # refused transactional id comes from init_transactions(), before any transaction.)
    abortable = True


class ClusterAuthorizationError(TwinlogError):
    """A broker-to-broker call from a caller the cluster does not allow to make it: no broker
    certificate, another broker's id, a broker that does not lead the coordinator or
    partition it speaks for. Nothing was changed. Fatal: what is wrong is who calls (Kafka's
    CLUSTER_AUTHORIZATION_FAILED); fix the broker's certificate or its configuration."""

    fatal = True


class StaleBrokerEpochError(TwinlogError):
    """A replica fetch carried a broker epoch that is not its broker's registration in
    ZooKeeper (a former incarnation of that broker, KIP-380): nothing was acknowledged.
    Retriable: the broker registers again or its current incarnation fetches."""

    retriable = True


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


# --- the cluster's metadata store (ZooKeeper; added by the cluster groundwork, issue 12) ---


class ConditionalWriteLostError(TwinlogError):
    """A conditional write to the metadata store lost a race: the value changed since this
    broker read it (another broker wrote it first). Nothing was written.

    Not retriable as it stands: the same write fails again. Read the value anew and decide
    again; a coordinator whose checkpoint pointer write lost has been replaced and stops.
    """
