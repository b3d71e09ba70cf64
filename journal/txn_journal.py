"""The transaction journal: the coordinator's log of decisions, one per journal partition.

It is stored like a data log (``twinlog.engine.log``: segments, indexes, CRCs,
recovery), one batch per record (``twinlog.journal.txn_records``). Every append is
fsynced before it returns: the coordinator answers a producer only after its decision
is durable.

Its checkpoint (``twinlog.journal.txn_checkpoint``) is CHECKPOINT records in
the log plus a pointer to them in a ``CheckpointPointerStore`` (by default the
file ``checkpoint`` in the journal's directory). Retention follows the pointer:
segments wholly below min(replay_from_offset, checkpoint_offset) are deleted
once the pointer is durable, never the one holding either offset.

In a broker (one node or a cluster) the journal is partition N of the replicated topic
``__txn_journal`` (CLUSTER.md §3.5), in ``DATA_DIR/logs/__txn_journal-N/``: the broker
hands in that partition's log and an appender whose wait returns only once the in-sync
replicas hold the record (so the coordinator acts on committed records only), and the
journal neither opens nor closes the log. Standing alone (its tests, tools) it opens its
own log in ``directory``.

Group commit: ``write`` appends a record without waiting; ``wait_durable(end)`` returns
once every record below ``end`` is fsynced (and, replicated, acknowledged). Records
written by many threads before one fsync share it. ``append`` is the two in one.

Thread rule: one coordinator thread writes at a time (the coordinator holds
its lock); ``wait_durable`` from any thread; ``replay`` runs at start-up before any append.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import CorruptJournalError, LogClosedError
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.log import DataLog, GroupFlush, LogConfig
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal.txn_checkpoint import (
    CHECKPOINT_PART_BYTES_MAX,
    Checkpoint,
    ProducerSnapshot,
    join_parts,
    split_into_parts,
)
from twinlog.journal.txn_checkpoint_pointer import (
    CheckpointPointer,
    CheckpointPointerStore,
    LocalCheckpointPointerFile,
)
from twinlog.journal.txn_records import CoordinatorRecord, decode, encode

CHECKPOINT_FILE = "checkpoint"
REPLAY_READ_BYTES = MEBIBYTE
# Journal records are small; small segments let the checkpoint free space soon.
TXN_JOURNAL_SEGMENT_BYTES = 64 * MEBIBYTE


class TxnJournal:
    def __init__(
        self,
        directory: str | os.PathLike[str],
        segment_bytes: int = TXN_JOURNAL_SEGMENT_BYTES,
        pointers: CheckpointPointerStore | None = None,
        checkpoint_part_bytes_max: int = CHECKPOINT_PART_BYTES_MAX,
        *,
        log: DataLog | None = None,
        appender: JournalAppender | None = None,
    ) -> None:
        """``log`` and ``appender``: a replicated journal's log (not opened or closed here)
        and how records go into it and are acknowledged; default: a local log in
        ``directory``, made durable by its own fsyncs."""
        self.directory = Path(directory)
        self._owns_log = log is None
        if log is None:
            config = LogConfig(
                segment_bytes=segment_bytes,
                retention_bytes=-1,
                retention_ms=-1,
                flush_policy="every_append",
            )
            log = DataLog.open(self.directory, config)
        self.log = log
        self._appender = appender or LocalAppender(log)
        self.pointers = pointers or LocalCheckpointPointerFile(self.directory / CHECKPOINT_FILE)
        self._checkpoint_part_bytes_max = checkpoint_part_bytes_max
        # The checkpoint this process wrote last, and the log end just after its records:
        # while the log has not moved since, a new checkpoint would say the same.
        self._last_checkpoint: tuple[Checkpoint, int] | None = None

    @property
    def cut_at_open(self) -> bool:
        """Did opening its log cut a torn or damaged tail? Records there may have been
        durable (damage) or not (a write the crash stopped): nobody can tell which."""
        return self.log.recovery_report.bytes_truncated > 0

    def append(self, record: CoordinatorRecord) -> int:
        """Append one record and wait until it is durable; its offset."""
        offset, end_offset = self.write(record)
        self.wait_durable(end_offset)
        return offset

    def write(self, record: CoordinatorRecord) -> tuple[int, int]:
        """Append one record without waiting: (its offset, the end offset to wait for)."""
        return self._appender.write(_batch(record))

    def wait_durable(self, end_offset: int) -> None:
        """Until every record below ``end_offset`` is fsynced (replicated: and held by
        the in-sync replicas). Raises when that cannot be known."""
        self._appender.wait_durable(end_offset)

    def _append_all(self, batches: Iterable[bytes]) -> tuple[int, int]:
        """(first offset, next offset) of batches of one record each: in one write on a
        local log; one by one on a replicated one, then one wait (a checkpoint whose parts
        are not all there is refused at read, and its pointer is written only after the
        last is durable)."""
        if self._owns_log:
            return self.log.append_all_as_leader(batches)
        written = [self._appender.write(batch) for batch in batches]
        self._appender.wait_durable(written[-1][1])
        return written[0][0], written[-1][1]

    def replay(self, from_offset: int) -> Iterator[tuple[int, CoordinatorRecord]]:
        """(offset, record) of every record from ``from_offset`` to the end."""
        offset = max(from_offset, self.log.log_start_offset)
        if from_offset < self.log.log_start_offset:
            raise CorruptJournalError(
                f"{self.directory}: replay must start at offset {from_offset}, but the journal "
                f"starts at {self.log.log_start_offset} (segments were lost)"
            )
        end = self.log.log_end_offset
        while offset < end:
            chunk = self.log.read(offset, REPLAY_READ_BYTES)
            if not chunk:
                break
            for batch in iter_batches(chunk):
                for record in batch.records():
                    if record.offset >= offset:
                        if record.value is None:
                            raise CorruptJournalError(
                                f"{self.directory}: journal record at offset {record.offset} is empty"
                            )
                        yield record.offset, decode(record.value)
                offset = batch.header.next_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    def read_checkpoint(self) -> Checkpoint | None:
        """The checkpoint the pointer names, None without a pointer; CorruptJournalError if
        its records are not all there."""
        pointer = self.pointers.read()
        if pointer is None:
            return None
        where = f"{self.directory}"
        start, end = self.log.log_start_offset, self.log.log_end_offset
        if not start <= pointer.replay_from_offset <= pointer.checkpoint_offset < end:
            return join_parts(  # raises, naming what is missing
                f"{where} (offsets {start}..{end - 1})",
                pointer.checkpoint_offset,
                pointer.replay_from_offset,
                (),
            )
        return join_parts(
            where,
            pointer.checkpoint_offset,
            pointer.replay_from_offset,
            (record for _, record in self.replay(pointer.checkpoint_offset)),
        )

    def write_checkpoint(
        self,
        timestamp_ms: int,
        replay_from_offset: int,
        producers: tuple[ProducerSnapshot, ...],
        low_watermark: int | None = None,
    ) -> Checkpoint:
        """Append the CHECKPOINT records (fsynced), point at them, then apply retention.

        Nothing is written when nothing was appended since the last checkpoint this
        journal wrote and it starts replay at the same place (an idle coordinator's
        journal does not grow by a checkpoint per interval).
        """
        if self._last_checkpoint is not None:
            last, end_after = self._last_checkpoint
            if (
                end_after == self.log.log_end_offset
                and last.replay_from_offset == replay_from_offset
            ):
                return last
        parts = split_into_parts(
            timestamp_ms, replay_from_offset, producers, self._checkpoint_part_bytes_max
        )
        first_offset, next_offset = self._append_all(_batch(part) for part in parts)
        failpoints.hit("txn_journal.before_checkpoint_pointer")
        self.pointers.write(CheckpointPointer(first_offset, replay_from_offset, low_watermark))
        checkpoint = Checkpoint(replay_from_offset, producers, first_offset)
        self._last_checkpoint = (checkpoint, next_offset)
        self.log.delete_segments_before(min(replay_from_offset, first_offset))
        return checkpoint

    def size_bytes(self) -> int:
        return self.log.size_bytes()

    def close(self) -> None:
        if self._owns_log:
            self.log.close()


class JournalAppender(Protocol):
    """How records go into the journal's log: ``write`` one batch without waiting ->
    (base offset, end offset); ``wait_durable(end)`` until every batch below ``end`` is
    durable (replicated: and acknowledged)."""

    def write(self, batch: bytes) -> tuple[int, int]: ...

    def wait_durable(self, end_offset: int) -> None: ...


class LocalAppender:
    """A journal standing alone: appends unflushed, waits share fsyncs (``GroupFlush``).

    A failed fsync leaves records whose fate is unknown (written, maybe lost), which
    its writer may have applied to memory already: every later write is refused, and
    the journal must be opened again, its records then deciding."""

    def __init__(self, log: DataLog) -> None:
        self._log = log
        self._flush = GroupFlush(log)
        self._failed: BaseException | None = None

    def write(self, batch: bytes) -> tuple[int, int]:
        if self._failed is not None:
            raise LogClosedError(
                f"the transaction journal in {self._log.directory} could not be made durable "
                f"({self._failed}); open it again: its records decide what stands"
            )
        base_offset = self._log.append_as_leader(batch, defer_flush=True)
        return base_offset, self._log.log_end_offset

    def wait_durable(self, end_offset: int) -> None:
        try:
            self._flush.wait_durable(end_offset)
        except BaseException as error:
            self._failed = self._failed or error
            raise


def _batch(record: CoordinatorRecord) -> bytes:
    """One record, one batch: a decision is durable alone, and replay reads it alone."""
    builder = RecordBatchBuilder("none")
    builder.append(encode(record), timestamp_ms=record.timestamp_ms)
    return builder.build()
