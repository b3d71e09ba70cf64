"""The data log of one partition: its offsets and leader epochs, the appends by origin,
its truncations, retention, and the doors compaction and readers use (Kafka's
UnifiedLog). The segments themselves, and every change to them, are the segment
list's (segment_list.py, Kafka's LocalLog); this log decides what is written, when it
is durable, and which cut is allowed.

Callers: a partition (engine/broker/partition.py) and its copier
(copier/partition_writer.py) for the data log, the journal logs (journal/) for theirs,
compaction (compaction.py) through its own API below.

Appends, named by where the batches come from:

* ``append_as_leader``: one batch this log is the leader of (a producer's, a journal
  or coordinator record); it gets its offsets and this log's leader epoch here.
* ``append_all_as_leader``: several such batches as one, all or nothing, seen at once
  (the copier's copy of a committed transaction, a checkpoint in parts).
* ``append_as_follower``: a follower's copy of its leader's batches, offsets and
  leader epochs kept as the leader gave them.

Truncations, named by what they do: ``truncate_to`` cuts the tail at an offset (a
follower's divergent suffix, a torn copy, journal records never applied);
``truncate_fully_and_start_at`` drops everything and starts empty further on (a
follower behind its leader's log start); ``delete_segments_before`` and retention take
whole segments from the head; ``advance_log_start`` moves the start to any offset
(DeleteRecords), deleting the whole segments below it. Recovery cuts a torn tail on open (recovery.py).

Watermarks (offsets, never positions):

* ``log_start_offset``: the first offset still stored. Retention moves it to
  the base offset of the oldest kept segment, ``advance_log_start`` to any offset up to
  the end (inside a segment: the bytes below it stay until the whole segment is below);
  both persist it (checkpoints.py).
* ``log_end_offset``: the offset the next appended record gets; one past the
  last offset of the last batch. Readers see batches below it only.

Leader epoch: every batch appended is stamped with the log's ``leader_epoch``
(its ``partition_leader_epoch`` field, outside the CRC, written as the base
offset is: by patching bytes), and ``epochs`` (leader_epochs.py, the file
``leader-epoch-checkpoint``) remembers where each epoch started. On one node
the epoch is 0 from creation; ``become_leader`` starts a higher one.

Follower fence: ``become_follower`` makes the leader's appends (``append_as_leader``,
``append_all_as_leader``) refuse with NotLeaderOrFollowerError until the next
``become_leader``, under the write lock, so no leader write of an older term (a copy
still in flight when its leader was deposed) lands once the replica follows. A
follower's log stamps the newest epoch it fetched: such a write would carry its new
leader's epoch, and the epoch check (KIP-101) could not tell it from the leader's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from twinlog.engine.base.errors import (
    CorruptBatchError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from twinlog.engine.log.append_marks import AppendMarks
from twinlog.engine.log.compaction_files import CleanedSegmentWriter
from twinlog.engine.log.config import LogConfig
from twinlog.engine.log.flush_policy import FlushPolicy, monotonic_ms
from twinlog.engine.log.leader_epochs import LeaderEpochCache
from twinlog.engine.log.recovery import RecoveryReport, recover
from twinlog.engine.log.retention import count_segments_below, count_segments_to_delete
from twinlog.engine.log.segment import Segment, wall_clock_ms
from twinlog.engine.log.segment_list import SegmentList
from twinlog.engine.log.segments_view import SegmentsView
from twinlog.engine.records.batch_format import (
    HEADER_BYTES,
    BatchHeader,
    check_header,
    read_header,
    unpack_header,
    validate_batch,
    with_log_position,
)
from twinlog.engine.records.decompression_budget import DecompressionBudget


class DataLog:
    """An append-only, segmented log of record batches in one directory.

    Thread rule: ONE writer thread per log calls the appends, ``flush``,
    ``flush_if_due``, the truncations, ``apply_retention``, ``delete_segments_before``,
    ``advance_log_start`` and ``close``. (An internal lock serializes these calls anyway, so a background
    retention or flush thread cannot tear an append; but appends from several threads
    would interleave in no promised order.) Any number of reader threads may call
    ``read``, ``iter_headers``, ``last_batch_header``, ``offset_for_timestamp``,
    ``size_bytes`` and the offset properties while it appends: readers take the
    published state (segments and end position, replaced whole after each append) and
    read with ``os.pread`` up to that end, so they see whole batches only, never a
    batch being written. A ``read`` racing ``truncate_to`` reads again from the cut
    log; the other reads may fail on the bytes it cuts.

    ``compact`` (cleanup.policy compact) may run in any thread, next to the
    writer: it reads sealed segments without the lock, through the compaction
    API below (``compaction_turn``, ``segments_view``, ``replace_segments``),
    which takes the lock only to show it the segments and to swap cleaned ones in.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        clock_ms: Callable[[], int] = monotonic_ms,
        leader_epoch: int | None = None,
    ) -> None:
        """Use ``DataLog.open``."""
        recovered = recover(directory, config)
        self.directory = directory
        self.config = config
        self.recovery_report: RecoveryReport = recovered.report
        self._segment_list = SegmentList(directory, config, recovered)
        # Serializes writer calls (the segment list's: its readers take it to rebuild an index).
        self._write_lock = self._segment_list.write_lock
        self._flush_policy = FlushPolicy(config, clock_ms)
        self._append_marks = AppendMarks(directory)
        start_offset = self._segment_list.log_start_offset
        self.epochs = LeaderEpochCache.load(
            directory,
            start_offset,
            self._segment_list.next_offset,
            lambda: self.iter_headers(start_offset),
        )
        self._leader_epoch = max(self.epochs.latest_epoch, 0)
        # True from become_follower to the next become_leader: the leader's appends are
        # refused meanwhile (the module's "Follower fence"). Read and set under the write lock.
        self._follows = False
        if leader_epoch is not None:
            self.become_leader(leader_epoch)

    def reconfigure(self, config: LogConfig) -> None:
        """Take ``config`` from now on (a topic's settings changed while it is open): the
        next roll, retention pass, compaction turn, flush and produce check use it; what is
        written stays as it is. ``index_interval_bytes`` applies to segments made after."""
        with self._write_lock:
            self.config = config
            self._segment_list.config = config
            self._flush_policy.config = config

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        clock_ms: Callable[[], int] = monotonic_ms,
        leader_epoch: int | None = None,
    ) -> DataLog:
        """Open (creating it if missing) and recover the log in ``directory``.

        ``clock_ms`` (monotonic milliseconds) times the interval flush policy;
        tests pass a fake one. ``leader_epoch``: as ``become_leader`` after the open;
        None keeps the latest epoch the log knows (0 for a new log).
        """
        return cls(
            Path(directory), config or LogConfig(), clock_ms=clock_ms, leader_epoch=leader_epoch
        )

    def __enter__(self) -> DataLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = self._segment_list.published
        return (
            f"DataLog({str(self.directory)!r}, offsets {state.log_start_offset}.."
            f"{state.log_end_offset}, {len(state.segments)} segments)"
        )

    # --- watermarks ---------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset still stored (reads below it raise OffsetOutOfRangeError)."""
        return self._segment_list.snapshot().log_start_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record gets."""
        return self._segment_list.snapshot().log_end_offset

    @property
    def unfinished_append_from(self) -> int | None:
        """Where an ``append_all_as_leader`` a killed process left torn begins (its
        ``append-state`` mark is still in progress); None when none is. It stays until
        this log's next write succeeds (the copier's recovery cuts or finishes the copy)."""
        state = self._append_marks.state
        return state.first_offset if state.in_progress else None

    @property
    def leader_epoch(self) -> int:
        """The epoch this log stamps on the batches it appends."""
        return self._leader_epoch

    def become_leader(self, epoch: int) -> None:
        """Stamp ``epoch`` from now on; it starts at the log end (recorded durably).

        The same epoch again is a no-op; a lower one raises ValueError: epochs only
        grow, and a log must never stamp an epoch older than one it already holds.
        """
        with self._write_lock:
            self._segment_list.check_open()
            self.epochs.assign(epoch, self._segment_list.next_offset)
            self._leader_epoch = epoch
            self._follows = False

    def become_follower(self) -> None:
        """This replica follows now: the leader's appends are refused until ``become_leader``
        (one in progress finishes first: this waits for the write lock)."""
        with self._write_lock:
            self._follows = True

    def _check_leads(self) -> None:
        """Under the write lock: refuse a leader's append on a log that follows."""
        if self._follows:
            raise NotLeaderOrFollowerError(
                f"{self.directory}: this replica follows its partition's leader now; a "
                "leader's write of an earlier term is refused (nothing was written): retry "
                "at the leader"
            )

    @property
    def truncations(self) -> int:
        """Cuts of the tail so far: bytes fsynced before a newer cut may be gone."""
        return self._segment_list.truncations

    @property
    def closed(self) -> bool:
        """Was ``close`` called? (Any thread; work in progress polls it to give up.)"""
        return self._segment_list.closed

    # --- appends (the writer thread) ----------------------------------------------

    def append_as_leader(
        self,
        batch: bytes | memoryview | list[bytes | memoryview],
        *,
        validate: bool = True,
        defer_flush: bool = False,
    ) -> int:
        """The leader's append of one batch: checked, given the next offsets and this log's
        leader epoch, written; return its base offset.

        Durable per the flush policy before returning; with ``defer_flush`` not yet: the
        caller makes it durable with ``GroupFlush.wait_durable`` (group commit), or the
        policy's next fsync does. Raises CorruptBatchError or
        BatchTooLargeError (nothing written), DiskFullError (nothing kept; retry
        after freeing space). ``validate=False`` skips only the CRC, for a caller
        that checked it already (the broker checks every batch once, at the door);
        the header is still parsed and checked.

        ``batch`` may be a list of pieces its caller built (the first holding the whole
        header), written with one ``pwritev`` without joining them. Their CRC is the
        caller's, who just computed it over these very pieces (``validate=False``, else
        ValueError); the header and its length against the pieces' are checked.
        """
        with self._write_lock:
            self._segment_list.check_open()
            self._check_leads()
            if isinstance(batch, list):
                if validate:
                    raise ValueError(
                        "a batch in pieces is its caller's: its CRC is not checked here; "
                        "pass validate=False"
                    )
                views = [memoryview(piece) for piece in batch]
                header = self._check_pieces(views)
            else:
                views = [memoryview(batch)]
                header = self._check_batch(views[0], validate=validate)
            base_offset = self._segment_list.next_offset
            active, position = self._write_as_leader(views, header)
            if self._flush_policy.note_append(header.size_bytes) and not defer_flush:
                try:
                    active.flush()
                except Exception as error:
                    self._segment_list.undo_append(active, position)
                    if isinstance(error, OSError):
                        active.raise_disk_full_or(error, "fsyncing a batch", position)
                    raise
                self._after_flush()
            self._segment_list.publish()
            self._append_marks.settle()
            return base_offset

    def append_all_as_leader(
        self,
        batches: Iterable[bytes | memoryview],
        *,
        validate: bool = True,
        batch_count: int | None = None,
    ) -> tuple[int, int]:
        """The leader's append of ``batches`` as one (the copier's copy of a committed
        transaction, a checkpoint in parts): contiguous, one fsync at the end; (first,
        next) offset.

        Streams: each batch is written as it comes, none is kept. May roll
        segments in between. Readers see the batches only after the fsync, all at
        once. If anything fails (a bad batch, a full disk, the iterable raising),
        every batch of this call is removed again and the error re-raised.
        ``validate=False`` skips the CRC (for batches validated on the way in) but
        still checks each header and length. ``batch_count`` (when the caller knows it)
        of 1 writes no append-in-progress mark: a reader of the files sees one batch
        whole or not at all; a second batch is then refused (ValueError, nothing kept).
        """
        written = [0]

        def write(view: memoryview) -> None:
            if written[0] == batch_count:
                raise ValueError(
                    f"{self.directory}: append_all_as_leader was told of {batch_count} "
                    "batches and given more; nothing of this call is kept"
                )
            self._write_as_leader([view], self._check_batch(view, validate=validate))
            written[0] += 1

        with self._write_lock:
            self._segment_list.check_open()
            self._check_leads()
            return self._append_all_or_nothing(
                batches, write, "appending many batches", marked=batch_count != 1
            )

    def append_as_follower(
        self, batches: Iterable[bytes | memoryview], *, sync: bool = True, marked: bool = True
    ) -> tuple[int, int]:
        """A follower's append: ``batches`` as its leader wrote them, offsets and leader
        epochs kept (never re-stamped), contiguous from this log's end; (first, next) offset.

        Each batch is CRC-checked (it crossed the network) and must start at the log end;
        a batch of a newer epoch records that epoch's start in the epoch checkpoint, so
        this log can answer ``end_offset_for_epoch`` like its leader (KIP-101). With
        ``sync`` the batches are fsynced before returning (a follower acknowledges by its
        next fetch offset, which must then be durable). All or nothing, as
        ``append_all_as_leader``: on any error every batch of this call is removed again.
        ``marked=False``: no append-in-progress mark, for a log no reader of the files
        opens (a journal log: only its broker reads it).
        """

        def write(view: memoryview) -> None:
            # A follower copies what its leader holds whatever its own batch limit says
            # (Kafka's appendAsFollower ignores the record size): a topic's
            # max.message.bytes, changed live, reaches the replicas one by one, and a
            # follower that learnt a lower limit later than its leader took a batch would
            # refuse it forever, holding every acks=all write behind it.
            header = self._check_batch(view, validate=True, size_checked=False)
            next_offset = self._segment_list.next_offset
            if header.base_offset != next_offset:
                raise CorruptBatchError(
                    f"{self.directory}: a replicated batch starts at offset "
                    f"{header.base_offset}, the log ends at {next_offset}: a "
                    "follower appends only contiguous batches"
                )
            epoch = header.partition_leader_epoch
            if epoch > self.epochs.latest_epoch:
                self.epochs.assign(epoch, header.base_offset)
                self._leader_epoch = max(self._leader_epoch, epoch)
            self._segment_list.append([view], header)  # as the leader wrote it: no patch

        with self._write_lock:
            return self._append_all_or_nothing(
                batches, write, "appending replicated batches", sync=sync, marked=marked
            )

    def _append_all_or_nothing(
        self,
        batches: Iterable[bytes | memoryview],
        write: Callable[[memoryview], None],
        doing: str,
        *,
        sync: bool = True,
        marked: bool = True,
    ) -> tuple[int, int]:
        """``write`` each batch at the log end, fsync once (``sync``), publish them all at
        once; on any error remove every batch of the call (and the epochs it recorded).
        ``marked``: readers of the files are told of the append while it runs (not
        needed for one batch, which costs a file replaced twice)."""
        segments = self._segment_list
        segments.check_open()
        first_offset, leader_epoch = segments.next_offset, self._leader_epoch
        if marked:
            self._append_marks.started(first_offset)  # readers of the files end here meanwhile
        try:
            for batch in batches:
                write(memoryview(batch))
            if sync:
                segments.active.flush()
        except BaseException as error:
            if first_offset != segments.next_offset:
                self._cut(first_offset)  # the epochs recorded meanwhile go too
            self._leader_epoch = leader_epoch
            if marked:
                self._append_marks.finished()
            if isinstance(error, OSError):
                segments.active.raise_disk_full_or(error, doing, segments.active.size_bytes)
            raise
        if sync:
            self._after_flush()
        segments.publish()
        if marked:
            self._append_marks.finished()
        else:
            self._append_marks.settle()
        return first_offset, segments.next_offset

    def _write_as_leader(self, views: list[memoryview], header: BatchHeader) -> tuple[Segment, int]:
        """Write one checked batch at the log end; (segment, position).

        The batch gets its offsets and this log's leader epoch by a patch of its first
        16 bytes (outside the CRC); the epoch's start is recorded first if it is new.
        """
        header = header._replace(
            base_offset=self._segment_list.next_offset, partition_leader_epoch=self._leader_epoch
        )
        if self._leader_epoch > self.epochs.latest_epoch:  # a log truncated below its start
            self.epochs.assign(self._leader_epoch, header.base_offset)
        pieces = [
            *with_log_position(views[0], header.base_offset, header.partition_leader_epoch),
            *views[1:],
        ]
        return self._segment_list.append(pieces, header)

    def _check_batch(
        self, view: memoryview, validate: bool, size_checked: bool = True
    ) -> BatchHeader:
        if size_checked:
            self._check_size(len(view))
        header = validate_batch(view) if validate else read_header(view)
        if header.size_bytes != len(view):
            raise CorruptBatchError(
                f"batch buffer holds {len(view)} bytes, its length field says "
                f"{header.size_bytes}: pass exactly one batch"
            )
        return header

    def _check_pieces(self, views: list[memoryview]) -> BatchHeader:
        """``_check_batch`` without the CRC, for a batch in pieces (the first holding the
        whole header)."""
        size_bytes = sum(len(view) for view in views)
        self._check_size(size_bytes)
        if len(views[0]) < HEADER_BYTES:
            raise CorruptBatchError(
                f"the first piece of a batch holds {len(views[0])} bytes, less than the "
                f"{HEADER_BYTES} of its header"
            )
        header = check_header(unpack_header(views[0]))
        if header.size_bytes != size_bytes:
            raise CorruptBatchError(
                f"batch pieces hold {size_bytes} bytes, its length field says "
                f"{header.size_bytes}: pass exactly one batch"
            )
        return header

    def _check_size(self, size_bytes: int) -> None:
        # Broker.produce applied the same rule to a producer's batch before it was journaled
        # or written; here it holds for every writer (the copier, a checkpoint, a follower).
        self.config.check_batch_bytes(size_bytes, self.directory)

    # --- durability ---------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything written."""
        with self._write_lock:
            self._flush_locked()

    def flush_beside_appends(self) -> int:
        """fsync everything written before the call, without holding appends back meanwhile;
        return the offset below which every batch is now durable.

        ``flush`` holds the write lock through the fsync, so every append waits for it;
        here the lock is held only to note what is written and after the fsync to move
        the recovery point. For one thread that makes a log durable while others append
        to it (the journal logs' writer), so appends made during one fsync are in the
        next: group commit. Raises DiskFullError as ``flush`` does (nothing is lost:
        the bytes stay, unflushed; retry).
        """
        return self._segment_list.flush_beside_appends()

    def flush_if_due(self) -> bool:
        """fsync if the interval policy's time is up for unflushed bytes; True if it did.

        The policy is otherwise checked only by ``append_as_leader``, so without this call
        the last appends of a burst stay unflushed until the next append. Call it
        every ``flush_interval_ms / 2`` or so (the broker does). Cheap when nothing
        is due; a no-op on a closed log (``close`` flushed it). Raises DiskFullError
        if the fsync fails for lack of space (the bytes stay, unflushed: retry).
        """
        with self._write_lock:
            if self._segment_list.closed or not self._flush_policy.due():
                return False
            self._flush_locked()
            return True

    def _flush_locked(self) -> None:
        self._segment_list.flush()
        self._after_flush()

    def _after_flush(self) -> None:
        self._flush_policy.note_flushed()
        self._segment_list.advance_recovery_point()

    def close(self) -> None:
        """Flush, checkpoint the end (so the next open scans nothing), close. Idempotent."""
        with self._write_lock:
            self._segment_list.close()

    # --- truncations (the writer thread) ------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose base offset is >= ``offset``; fsync; return bytes removed.

        ``offset`` must be a batch boundary (a batch's base offset, or the log
        end), else ValueError. After a crash during the call the log holds a
        prefix between ``offset`` and the old end: call it again.
        """
        with self._write_lock:
            segments = self._segment_list
            segments.check_open()
            start_offset, next_offset = segments.log_start_offset, segments.next_offset
            if offset == next_offset:
                return 0
            if not start_offset <= offset < next_offset:
                raise OffsetOutOfRangeError(
                    f"cannot truncate to offset {offset}: the log holds offsets "
                    f"{start_offset}..{next_offset}",
                    start_offset,
                    next_offset,
                )
            removed_bytes = self._cut(offset)
            segments.publish()
            self._append_marks.settle()
            return removed_bytes

    def _cut(self, offset: int) -> int:
        """Cut the segments at ``offset``, then the epochs that started at or after it
        (after the cut: a crash between, open trims them); bytes removed. Not published."""
        removed_bytes = self._segment_list.cut(offset)
        self.epochs.truncate_from_end(offset)
        return removed_bytes

    def truncate_fully_and_start_at(self, offset: int) -> int:
        """Drop every segment and start empty at ``offset``, past the log end (a follower
        whose leader no longer holds what follows this log's end: Kafka's
        truncateFullyAndStartAt). Returns the segments dropped.

        Crash order: the log start checkpoint first (recovery then deletes the segments
        wholly below it, and creates the first segment there if none is left), the old
        segments oldest first, then the new segment. A crash before the last old segment
        is deleted leaves the old log (the checkpoint past its end is ignored), and the
        follower is refused and restarts again.
        """
        with self._write_lock:
            self._segment_list.check_open()
            next_offset = self._segment_list.next_offset
            if offset <= next_offset:
                raise ValueError(
                    f"truncate_fully_and_start_at({offset}): the log already reaches "
                    f"{next_offset}; truncate_to or delete_segments_before instead"
                )
            dropped = self._segment_list.start_over_at(offset)
            self._append_marks.settle()
            self.epochs.clear()
            return dropped

    # --- retention (the writer thread) --------------------------------------------

    def apply_retention(
        self,
        now_ms: int | None = None,
        *,
        protected_from_offset: Callable[[], int | None] | None = None,
    ) -> int:
        """Delete whole old segments past retention_bytes / retention_ms; return how many.

        ``protected_from_offset()`` (asked under the write lock, so no append moves it
        meanwhile) is the owner's bound, as compaction gets it: no segment holding an
        offset at or above it is deleted (None: no bound).
        """
        with self._write_lock:
            self._segment_list.check_open()
            if not self.config.deletes:
                return 0  # cleanup.policy compact: compaction, not retention, bounds the log
            now_ms = wall_clock_ms() if now_ms is None else now_ms
            segments = self._segment_list.segments
            log_bytes = sum(segment.size_bytes for segment in segments)
            count = count_segments_to_delete(segments[:-1], log_bytes, now_ms, self.config)
            protected = protected_from_offset() if protected_from_offset else None
            if protected is not None:
                next_base_offsets = [segment.base_offset for segment in segments[1:]]
                count = min(count, count_segments_below(next_base_offsets, protected))
            return self._delete_oldest_segments(count)

    def delete_segments_before(self, offset: int) -> int:
        """Delete the whole segments that hold only offsets below ``offset``; return how many.

        Never the active segment. For logs whose owner knows what it no longer
        needs (the transaction journal after a checkpoint). Advances
        ``log_start_offset`` to the base offset of the first kept segment.
        """
        with self._write_lock:
            self._segment_list.check_open()
            segments = self._segment_list.segments
            count = 0
            while count < len(segments) - 1 and segments[count + 1].base_offset <= offset:
                count += 1
            return self._delete_oldest_segments(count)

    def advance_log_start(
        self,
        offset: int,
        *,
        protected_from_offset: Callable[[], int | None] | None = None,
    ) -> int:
        """Move the log start up to ``offset``, inside a segment if need be, and delete the
        whole segments below it (Kafka's DeleteRecords, and a follower taking its leader's
        log start); return the log start now. Reads below it raise OffsetOutOfRangeError.

        Durable first: the log-start checkpoint is written before a segment is deleted, so
        a restart keeps the new start (and deletes what a crash left below it). Never
        backwards: an ``offset`` at or below the start changes nothing. Past the log end:
        OffsetOutOfRangeError, nothing changed. ``protected_from_offset()`` (asked under
        the write lock, as ``apply_retention`` asks it) bounds the move: the start stops
        there, and the caller tells its client by the start returned.
        """
        with self._write_lock:
            segments = self._segment_list
            segments.check_open()
            start_offset, next_offset = segments.log_start_offset, segments.next_offset
            if offset > next_offset:
                raise OffsetOutOfRangeError(
                    f"{self.directory}: cannot start the log at offset {offset}: it holds "
                    f"offsets {start_offset}..{next_offset}; pick an offset at most {next_offset}",
                    start_offset,
                    next_offset,
                )
            if offset <= start_offset:
                return start_offset
            protected = protected_from_offset() if protected_from_offset else None
            if protected is not None:
                offset = min(offset, protected)
            if offset <= start_offset:
                return start_offset
            segments.advance_start(offset)
            self.epochs.truncate_from_start(offset)
            kept = segments.segments
            count = 0
            while count < len(kept) - 1 and kept[count + 1].base_offset <= offset:
                count += 1
            self._delete_oldest_segments(count)
            return offset

    def _delete_oldest_segments(self, count: int) -> int:
        if count == 0:
            return 0
        doomed = self._segment_list.take_oldest(count)
        self.epochs.truncate_from_start(self._segment_list.log_start_offset)
        self._segment_list.delete(doomed)
        return count

    # --- compaction API (any thread; what compaction.py uses, as Kafka's cleaner
    # --- uses its log's replaceSegments; the invariants are kept in segment_list.py) --

    def compaction_turn(self) -> AbstractContextManager[str]:
        """Hold this log's compaction turn for the ``with`` block; yields "" if granted.

        Else yields why not, without waiting: another compaction holds the turn, or
        an earlier swap failed after its commit and the log must be reopened first.
        Only the thread holding a granted turn may call ``replace_segments``.
        """
        return self._segment_list.compaction_turns.take()

    def segments_view(self) -> AbstractContextManager[SegmentsView]:
        """The segments as they are now, for the ``with`` block (segments_view.py).

        The block holds the write lock (appends wait), so the view stays true and
        its segments open while it runs: keep it short (choose segments, duplicate
        their descriptors, leave). Raises LogClosedError if the log is closed.
        """
        return self._segment_list.segments_view()

    def replace_segments(
        self, old: Sequence[Segment], new: CleanedSegmentWriter, view: SegmentsView
    ) -> bool:
        """Put the cleaned segment ``new`` in place of ``old``; True if done, False if refused.

        ``old``: consecutive segments of ``view.sealed``, ``view`` taken in the
        compaction turn the caller holds. ``new``: finished (written and fsynced, not
        committed), holding exactly the offsets of ``old``, and only batches whose CRC
        and offsets the caller checked (readers will not check them again). The call
        owns ``new``'s files from here on: swapped in, or deleted.

        Refused (``new`` deleted, nothing changed) if the log changed since ``view``:
        closed, truncated, ``old`` no longer consecutive sealed segments of the log or
        of another size, the recovery point moved before their end, or compaction
        stopped. Else, under the write lock, the swap is committed and completed
        (compaction_files.py: after a crash at any step the next open holds the old
        segments or the new one) and the new segment published; readers holding the
        old ones keep reading them through their open descriptors.

        Raises if the swap fails: before its commit with ``new`` deleted and the log
        unchanged; after it, the log goes on serving the old segments, and
        ``compaction_turn`` grants no turn until the log is reopened.
        """
        return self._segment_list.replace_segments(old, new, view)

    # --- reading (any thread) -----------------------------------------------------

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one).

        Returns b"" at the log end. Raises OffsetOutOfRangeError below the start or
        above the end. Bytes come from one segment; call again from the next offset.

        Never returns a bad batch: bytes this process has not checked yet (those
        before the recovery point when the log was opened) are checked here, once,
        CRC and offsets; a bad batch raises CorruptLogError naming the segment file
        and the position, and nothing of the read is returned.

        A read that races a truncation (a follower cutting a divergent suffix) is read
        again from the cut log: what it met was the cut, not damage.
        """
        return self._segment_list.read(offset, max_bytes)

    def iter_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches from the one holding ``from_offset`` to the end (at the call).

        Each batch is CRC-checked before its header is yielded (once per process, as
        ``read`` checks: bytes recovery or an earlier read checked are not read again),
        because callers act on the headers (producer sequences, a copy's recognition):
        a damaged batch raises CorruptLogError naming the segment and position, as
        ``read`` does, and its header is never yielded.
        """
        return self._segment_list.iter_headers(from_offset)

    def last_batch_header(self) -> BatchHeader | None:
        return self._segment_list.snapshot().last_header

    def offset_for_timestamp(
        self, timestamp_ms: int, budget: DecompressionBudget | None = None
    ) -> int | None:
        """Offset of the first record whose timestamp is >= ``timestamp_ms``, or None."""
        found = self.record_for_timestamp(timestamp_ms, budget)
        return None if found is None else found[0]

    def record_for_timestamp(
        self, timestamp_ms: int, budget: DecompressionBudget | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp_ms``
        (Kafka's ListOffsets answers both), or None. The batch whose records are read is
        charged to ``budget`` (the broker's) while it is decompressed."""
        return self._segment_list.record_for_timestamp(timestamp_ms, budget)

    def record_with_max_timestamp(
        self, budget: DecompressionBudget | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp (Kafka's
        ListOffsets MAX_TIMESTAMP), or None for a log without records."""
        return self._segment_list.record_with_max_timestamp(budget)

    def size_bytes(self) -> int:
        return self._segment_list.snapshot().size_bytes()

    def bytes_from(self, offset: int) -> int:
        """The bytes from the batch holding ``offset`` to the end: what a replica whose
        log ends at ``offset`` has still to copy (0 at the end; the whole log below the
        start)."""
        return self._segment_list.bytes_from(offset)

    def check(self) -> None:
        """Assert the log's invariants (segment_list.py; for tests and tools: costs a walk
        per segment end)."""
        self._segment_list.check()
