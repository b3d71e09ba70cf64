"""The data log of one partition: segments, appends, reads, retention, truncation.

Watermarks (offsets, never positions):

* ``log_start_offset``: the first offset still stored. Retention moves it to
  the base offset of the oldest kept segment and persists it (checkpoints.py).
* ``log_end_offset``: the offset the next appended record gets; one past the
  last offset of the last batch. Readers see batches below it only.

Leader epoch: every batch appended is stamped with the log's ``leader_epoch``
(its ``partition_leader_epoch`` field, outside the CRC, written as the base
offset is: by patching bytes), and ``epochs`` (leader_epochs.py, the file
``leader-epoch-checkpoint``) remembers where each epoch started. On one node
the epoch is 0 from creation; ``become_leader`` starts a higher one.

Invariant (asserted by ``check``): segments are in ascending base offset,
contiguous (each one's next offset is the base offset of the one after it),
and ``log_start_offset <= log_end_offset``.
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple, TypeVar

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    CorruptLogError,
    LogClosedError,
    OffsetOutOfRangeError,
)
from twinlog.engine.log.append_marks import AppendMarks
from twinlog.engine.log.checkpoints import (
    RecoveryPoint,
    retract_recovery_point,
    try_write_recovery_point,
    write_log_start_offset,
)
from twinlog.engine.log.compaction_files import (
    CleanedSegmentWriter,
    commit_swap,
    complete_swap,
    is_committed,
)
from twinlog.engine.log.compaction_turns import CompactionTurns
from twinlog.engine.log.config import LogConfig
from twinlog.engine.log.files import fsync_directory
from twinlog.engine.log.flush_policy import FlushPolicy, monotonic_ms
from twinlog.engine.log.leader_epochs import LeaderEpochCache
from twinlog.engine.log.recovery import RecoveryReport, recover
from twinlog.engine.log.retention import count_segments_below, count_segments_to_delete
from twinlog.engine.log.segment import Segment, fsync_segment_fd, wall_clock_ms
from twinlog.engine.log.segment_index import RELATIVE_OFFSET_MAX, IndexDamagedError
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

logger = logging.getLogger(__name__)
Result = TypeVar("Result")

# After this many bytes flushed into the active segment, checkpoint a new
# recovery point, so a crash rescans at most this much (plus one flush).
RECOVERY_POINT_INTERVAL_BYTES = 64 << 20
# A read that met a truncation is tried again (each try sees a newer cut, so few suffice).
READ_ATTEMPTS_MAX = 3


class _Published(NamedTuple):
    """What readers may see; replaced whole (one attribute store) after each change."""

    segments: tuple[Segment, ...]
    base_offsets: tuple[int, ...]
    end_position: int  # readable bytes of segments[-1]; earlier segments are whole
    log_start_offset: int
    log_end_offset: int
    last_header: BatchHeader | None


class DataLog:
    """An append-only, segmented log of record batches in one directory.

    Thread rule: ONE writer thread per log calls ``append``, ``append_many``,
    ``flush``, ``flush_if_due``, ``truncate_to``, ``apply_retention``,
    ``delete_segments_before`` and ``close``. (An internal lock serializes these
    calls anyway, so a background retention or flush thread cannot tear an append;
    but appends from several threads would interleave in no promised order.) Any
    number of reader threads may call ``read``, ``iter_headers``,
    ``last_batch_header``, ``offset_for_timestamp``, ``size_bytes`` and the offset
    properties while it appends: readers take the published state (segments and end
    position, replaced whole after each append) and read with ``os.pread`` up to
    that end, so they see whole batches only, never a batch being written. Readers
    racing ``truncate_to`` may fail on the bytes it cuts; callers truncate during
    recovery, before serving reads.

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
        self._segments = recovered.segments
        self._log_start_offset = recovered.log_start_offset
        active = self._segments[-1]
        tail = active.tail()
        self._next_offset = tail.next_offset
        self._last_header = tail.last_header
        if self._last_header is None and len(self._segments) > 1:
            self._last_header = self._segments[-2].tail().last_header
        self._recovery_point = RecoveryPoint(
            active.base_offset, active.size_bytes, self._next_offset
        )
        self._flush_policy = FlushPolicy(config, clock_ms)
        self._append_marks = AppendMarks(directory)
        self._closed = False
        # (segments, their base offsets) as tuples for _publish; None after the list changed.
        self._segments_to_publish: tuple[tuple[Segment, ...], tuple[int, ...]] | None = None
        # Serializes writer calls. Readers take it only to rebuild a damaged index.
        self._write_lock = threading.RLock()
        # Compaction: one at a time; it swaps only if no truncation happened since it
        # chose its segments; a swap that failed half-way stops it until the log is
        # reopened (whose recovery finishes the swap).
        self._compaction_turns = CompactionTurns()
        self._truncations = 0
        self._publish()
        self.epochs = LeaderEpochCache.load(
            directory,
            self._log_start_offset,
            self._next_offset,
            lambda: self.iter_headers(self._log_start_offset),
        )
        self._leader_epoch = max(self.epochs.latest_epoch, 0)
        if leader_epoch is not None:
            self.become_leader(leader_epoch)

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
        state = self._published
        return (
            f"DataLog({str(self.directory)!r}, offsets {state.log_start_offset}.."
            f"{state.log_end_offset}, {len(state.segments)} segments)"
        )

    # --- watermarks ---------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset still stored (reads below it raise OffsetOutOfRangeError)."""
        return self._snapshot().log_start_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record gets."""
        return self._snapshot().log_end_offset

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
            self._check_open()
            self.epochs.assign(epoch, self._next_offset)
            self._leader_epoch = epoch

    @property
    def closed(self) -> bool:
        """Was ``close`` called? (Any thread; work in progress polls it to give up.)"""
        return self._closed

    # --- writing (the writer thread) ----------------------------------------------

    def append(self, batch: bytes | memoryview, *, validate: bool = True) -> int:
        """Validate ``batch``, give it the next offsets, write it; return its base offset.

        Durable per the flush policy before returning. Raises CorruptBatchError or
        BatchTooLargeError (nothing written), DiskFullError (nothing kept; retry
        after freeing space). ``validate=False`` skips only the CRC, for a caller
        that checked it already (the broker checks every batch once, at the door);
        the header is still parsed and checked.
        """
        with self._write_lock:
            return self._append_locked(batch, validate)

    def append_pieces(self, pieces: Sequence[bytes | memoryview]) -> int:
        """``append(b"".join(pieces), validate=False)`` without the join: one batch that its
        caller built as pieces (the first holding the whole header), written with one
        ``pwritev``. Its CRC is not checked (the caller just computed it over these very
        pieces); its header and its length against the pieces' are."""
        with self._write_lock:
            return self._append_locked(list(pieces), validate=False)

    def _append_locked(
        self, batch: bytes | memoryview | list[bytes | memoryview], validate: bool = True
    ) -> int:
        self._check_open()
        if isinstance(batch, list):  # pieces (append_pieces)
            assert not validate, "a batch in pieces is its caller's: its CRC is not checked"
            views = [memoryview(piece) for piece in batch]
            header = self._check_pieces(views)
        else:
            view = memoryview(batch)
            views = [view]
            header = self._check_batch(view, validate=validate)
        base_offset = self._next_offset
        active, position = self._write(views, header)
        if self._flush_policy.note_append(header.size_bytes):
            try:
                active.flush()
            except Exception as error:
                self._undo_last_append(active, position)
                if isinstance(error, OSError):
                    active.raise_disk_full_or(error, "fsyncing a batch", position)
                raise
            self._after_flush()
        self._publish()
        self._append_marks.settle()
        return base_offset

    def append_many(
        self,
        batches: Iterable[bytes | memoryview],
        *,
        validate: bool = True,
        batch_count: int | None = None,
    ) -> tuple[int, int]:
        """Append ``batches`` contiguously with one fsync at the end; (first, next) offset.

        Streams: each batch is written as it comes, none is kept. May roll
        segments in between. Readers see the batches only after the fsync, all at
        once. If anything fails (a bad batch, a full disk, the iterable raising),
        every batch of this call is removed again and the error re-raised.
        ``validate=False`` skips the CRC (for batches validated on the way in) but
        still checks each header and length. ``batch_count`` (when the caller knows it)
        of 1 writes no append-in-progress mark: a reader of the files sees one batch
        whole or not at all; a second batch is then refused (ValueError, nothing kept).
        """
        with self._write_lock:
            return self._append_many_locked(batches, validate=validate, batch_count=batch_count)

    def _append_many_locked(
        self,
        batches: Iterable[bytes | memoryview],
        *,
        validate: bool = True,
        batch_count: int | None = None,
    ) -> tuple[int, int]:
        written = [0]

        def write(view: memoryview) -> None:
            if written[0] == batch_count:
                raise ValueError(
                    f"{self.directory}: append_many was told of {batch_count} batches and "
                    "given more; nothing of this call is kept"
                )
            self._write([view], self._check_batch(view, validate=validate))
            written[0] += 1

        return self._append_all_or_nothing(
            batches, write, "appending many batches", marked=batch_count != 1
        )

    def append_replicated(
        self, batches: Iterable[bytes | memoryview], *, sync: bool = True
    ) -> tuple[int, int]:
        """A follower's append: ``batches`` as its leader wrote them, offsets and leader
        epochs kept (never re-stamped), contiguous from this log's end; (first, next) offset.

        Each batch is CRC-checked (it crossed the network) and must start at the log end;
        a batch of a newer epoch records that epoch's start in the epoch checkpoint, so
        this log can answer ``end_offset_for_epoch`` like its leader (KIP-101). With
        ``sync`` the batches are fsynced before returning (a follower acknowledges by its
        next fetch offset, which must then be durable). All or nothing, as
        ``append_many``: on any error every batch of this call is removed again.
        """

        def write(view: memoryview) -> None:
            header = self._check_batch(view, validate=True)
            if header.base_offset != self._next_offset:
                raise CorruptBatchError(
                    f"{self.directory}: a replicated batch starts at offset "
                    f"{header.base_offset}, the log ends at {self._next_offset}: a "
                    "follower appends only contiguous batches"
                )
            self._write_replicated(view, header)

        with self._write_lock:
            return self._append_all_or_nothing(
                batches, write, "appending replicated batches", sync=sync
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
        self._check_open()
        first_offset, leader_epoch = self._next_offset, self._leader_epoch
        if marked:
            self._append_marks.started(first_offset)  # readers of the files end here meanwhile
        try:
            for batch in batches:
                write(memoryview(batch))
            if sync:
                self._segments[-1].flush()
        except BaseException as error:
            self._roll_back_to(first_offset)  # the epochs recorded meanwhile go too
            self._leader_epoch = leader_epoch
            if marked:
                self._append_marks.finished()
            if isinstance(error, OSError):
                self._segments[-1].raise_disk_full_or(error, doing, self._segments[-1].size_bytes)
            raise
        if sync:
            self._after_flush()
        self._publish()
        if marked:
            self._append_marks.finished()
        else:
            self._append_marks.settle()
        return first_offset, self._next_offset

    def _write_replicated(self, view: memoryview, header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch > self.epochs.latest_epoch:
            self.epochs.assign(epoch, header.base_offset)
            self._leader_epoch = max(self._leader_epoch, epoch)
        active = self._segments[-1]
        if self._roll_due(active, header):
            active = self._roll()
        active.append([view], header)  # as the leader wrote it: no offset or epoch patch
        self._next_offset = header.next_offset
        self._last_header = header

    def flush(self) -> None:
        """fsync everything written."""
        with self._write_lock:
            return self._flush_locked()

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
        with self._write_lock:
            self._check_open()
            active = self._segments[-1]
            position = active.size_bytes
            end_offset = self._next_offset
            truncations = self._truncations
            fd = active.duplicate_write_fd()
        if fd >= 0:  # a sealed active segment was fsynced by its seal
            try:
                fsync_segment_fd(fd)
            except OSError as error:
                active.raise_disk_full_or(error, "fsyncing", position)
            finally:
                os.close(fd)
        with self._write_lock:
            # After a roll the new segment's recovery point is written already; after a
            # truncation (which may have written other bytes at ``position``) or a close,
            # the old one stands. Only an unchanged active segment moves it.
            unchanged = self._truncations == truncations and self._segments[-1] is active
            if not self._closed and unchanged:
                self._move_recovery_point(active, position, end_offset)
        return end_offset

    def flush_if_due(self) -> bool:
        """fsync if the interval policy's time is up for unflushed bytes; True if it did.

        The policy is otherwise checked only by ``append``, so without this call
        the last appends of a burst stay unflushed until the next append. Call it
        every ``flush_interval_ms / 2`` or so (the broker does). Cheap when nothing
        is due; a no-op on a closed log (``close`` flushed it). Raises DiskFullError
        if the fsync fails for lack of space (the bytes stay, unflushed: retry).
        """
        with self._write_lock:
            if self._closed or not self._flush_policy.due():
                return False
            self._flush_locked()
            return True

    def _flush_locked(self) -> None:
        self._check_open()
        active = self._segments[-1]
        try:
            active.flush()
        except OSError as error:
            active.raise_disk_full_or(error, "fsyncing", active.size_bytes)
        self._after_flush()

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose base offset is >= ``offset``; fsync; return bytes removed.

        ``offset`` must be a batch boundary (a batch's base offset, or the log
        end), else ValueError. After a crash during the call the log holds a
        prefix between ``offset`` and the old end: call it again.
        """
        with self._write_lock:
            return self._truncate_to_locked(offset)

    def _truncate_to_locked(self, offset: int) -> int:
        self._check_open()
        if offset == self._next_offset:
            return 0
        if not self._log_start_offset <= offset < self._next_offset:
            raise OffsetOutOfRangeError(
                f"cannot truncate to offset {offset}: the log holds offsets "
                f"{self._log_start_offset}..{self._next_offset}",
                self._log_start_offset,
                self._next_offset,
            )
        removed_bytes = self._truncate(offset)
        self._publish()
        self._append_marks.settle()
        return removed_bytes

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
            return self._apply_retention_locked(now_ms, protected_from_offset)

    def _apply_retention_locked(
        self,
        now_ms: int | None = None,
        protected_from_offset: Callable[[], int | None] | None = None,
    ) -> int:
        self._check_open()
        if not self.config.deletes:
            return 0  # cleanup.policy compact: compaction, not retention, bounds the log
        now_ms = wall_clock_ms() if now_ms is None else now_ms
        sealed = self._segments[:-1]
        log_bytes = sum(segment.size_bytes for segment in self._segments)
        count = count_segments_to_delete(sealed, log_bytes, now_ms, self.config)
        protected = protected_from_offset() if protected_from_offset else None
        if protected is not None:
            next_base_offsets = [segment.base_offset for segment in self._segments[1:]]
            count = min(count, count_segments_below(next_base_offsets, protected))
        return self._delete_oldest_segments(count)

    def delete_segments_before(self, offset: int) -> int:
        """Delete the whole segments that hold only offsets below ``offset``; return how many.

        Never the active segment. For logs whose owner knows what it no longer
        needs (the transaction journal after a checkpoint). Advances
        ``log_start_offset`` to the base offset of the first kept segment.
        """
        with self._write_lock:
            self._check_open()
            count = 0
            while (
                count < len(self._segments) - 1 and self._segments[count + 1].base_offset <= offset
            ):
                count += 1
            return self._delete_oldest_segments(count)

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
            self._check_open()
            if offset <= self._next_offset:
                raise ValueError(
                    f"truncate_fully_and_start_at({offset}): the log already reaches "
                    f"{self._next_offset}; truncate_to or delete_segments_before instead"
                )
            self._truncations += 1  # first: a compaction must not swap over it
            doomed = list(self._segments)
            write_log_start_offset(self.directory, offset)
            for segment in doomed:  # oldest first: a crash leaves a contiguous suffix
                segment.delete()
            fsync_directory(self.directory)
            fresh = Segment.create(self.directory, offset, self.config.index_interval_bytes)
            fsync_directory(self.directory)
            self._segments = [fresh]
            self._log_start_offset = offset
            self._next_offset = offset
            self._last_header = None
            self._segments_to_publish = None
            self._write_recovery_point(RecoveryPoint(offset, 0, offset))
            self._publish()
            self._append_marks.settle()
            self.epochs.clear()
            return len(doomed)

    def _delete_oldest_segments(self, count: int) -> int:
        if count == 0:
            return 0
        doomed = self._segments[:count]
        new_start_offset = max(self._segments[count].base_offset, self._log_start_offset)
        # Checkpoint first: if we crash while deleting, open deletes the rest.
        write_log_start_offset(self.directory, new_start_offset)
        self._log_start_offset = new_start_offset
        del self._segments[:count]
        self._segments_to_publish = None
        self._publish()
        self.epochs.truncate_from_start(new_start_offset)
        for segment in doomed:
            segment.delete()  # readers holding it keep reading through their open fd
        fsync_directory(self.directory)
        return count

    # --- compaction API (any thread; what compaction.py uses, as Kafka's cleaner
    # --- uses its log's replaceSegments) --------------------------------------------
    #
    # Invariants (asserted, or kept by refusing the swap):
    # * one compaction turn at a time; ``replace_segments`` runs only in a turn, with a
    #   view taken in that same turn, so no other compaction swapped in between;
    # * a swap happens under the write lock, only while the log still holds exactly
    #   the replaced segments, consecutive and sealed, at the sizes and truncation
    #   count of the view, and only before the recovery point's segment (else it is
    #   refused);
    # * the new segment holds exactly the offsets of the ones it replaces, so the
    #   segments stay contiguous and the watermarks do not move;
    # * after a swap failed past its commit, no turn is granted until the log is
    #   reopened (recovery then finishes the swap, compaction_files.py).

    @contextmanager
    def compaction_turn(self) -> Iterator[str]:
        """Hold this log's compaction turn for the ``with`` block; yields "" if granted.

        Else yields why not, without waiting: another compaction holds the turn, or
        an earlier swap failed after its commit and the log must be reopened first.
        Only the thread holding a granted turn may call ``replace_segments``.
        """
        with self._compaction_turns.take() as refused:
            yield refused

    @contextmanager
    def segments_view(self) -> Iterator[SegmentsView]:
        """The segments as they are now, for the ``with`` block (segments_view.py).

        The block holds the write lock (appends wait), so the view stays true and
        its segments open while it runs: keep it short (choose segments, duplicate
        their descriptors, leave). Raises LogClosedError if the log is closed.
        """
        with self._write_lock:
            self._check_open()
            sealed = tuple(self._segments[:-1])
            view = SegmentsView(
                sealed=sealed,
                sealed_size_bytes=tuple(segment.size_bytes for segment in sealed),
                active=self._segments[-1],
                recovery_point_base_offset=self._recovery_point.segment_base_offset,
                log_end_offset=self._next_offset,
                truncations=self._truncations,
                compaction_turn=self._compaction_turns.held(),
            )
            view.check()
            yield view

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
        assert old, "nothing to replace"
        assert view.compaction_turn and view.compaction_turn == self._compaction_turns.held(), (
            "replace_segments needs the compaction turn its view was taken in"
        )
        first_in_view = next((n for n, s in enumerate(view.sealed) if s is old[0]), None)
        assert first_in_view is not None, "the replaced segments come from the view"
        assert list(view.sealed[first_in_view : first_in_view + len(old)]) == list(old)
        assert new.finished and new.base_offset == old[0].base_offset, (new.base_offset, old)
        base_offset, end_offset = new.base_offset, new.next_offset
        with self._write_lock:
            first = self._replaceable_at(old, view, first_in_view, end_offset)
            if first is None:
                new.discard()
                return False
            # A planner read this tail already (it is cached: no file is read here).
            assert old[-1].tail().next_offset == end_offset, (old, end_offset)
            watermarks = self._log_start_offset, self._next_offset
            cleaned = self._swap_in(base_offset, end_offset, new)
            cleaned.checked.add(0, cleaned.size_bytes)  # the caller checked every batch
            self._segments[first : first + len(old)] = [cleaned]
            self._segments_to_publish = None
            if self._segments[-1].size_bytes == 0:  # the last header is that of the one before
                self._last_header = self._last_header_before(self._segments[-1])
            self._publish()
            # Still contiguous where it joins the next segment; the offsets did not move.
            assert (self._log_start_offset, self._next_offset) == watermarks
            assert cleaned.size_bytes == new.size_bytes, (cleaned, new.size_bytes)
            assert self._segments[first + 1].base_offset == end_offset
            assert first == 0 or self._segments[first - 1].base_offset < base_offset
            assert self._published.segments[first] is cleaned
        return True

    def _replaceable_at(
        self, old: Sequence[Segment], view: SegmentsView, first_in_view: int, end_offset: int
    ) -> int | None:
        """Where ``old`` starts in the log (write lock held), if it may still be replaced."""
        segments = self._segments
        first = next((n for n, segment in enumerate(segments) if segment is old[0]), None)
        sizes_then = view.sealed_size_bytes[first_in_view : first_in_view + len(old)]
        refused = (
            self._closed
            or self._compaction_turns.stopped
            or self._truncations != view.truncations
            or first is None
            or segments[first : first + len(old)] != list(old)
            or first + len(old) >= len(segments)  # the last of them became the active one
            or any(s.size_bytes != size for s, size in zip(old, sizes_then, strict=True))
            or self._recovery_point.segment_base_offset < end_offset
        )
        return None if refused else first

    def _swap_in(self, base_offset: int, end_offset: int, new: CleanedSegmentWriter) -> Segment:
        """Commit and complete the swap on disk (compaction_files.py); the opened new segment."""
        completing = False
        try:
            commit_swap(self.directory, base_offset)
            completing = True
            complete_swap(self.directory, base_offset, end_offset)
            return Segment.open_existing(
                self.directory, base_offset, self.config.index_interval_bytes
            )
        except BaseException as error:
            if not completing and not is_committed(self.directory, base_offset):
                new.discard()  # the old segments are untouched
                raise
            # Committed: the files are between old and new, which the recovery on the
            # next open sorts out. Until then this log serves the old segments (their
            # descriptors are open) and compacts nothing more.
            self._compaction_turns.stop(
                f"a compaction of offsets {base_offset}..{end_offset} was committed but not "
                f"put in place ({error!r}); reopen the log to finish it"
            )
            raise

    def close(self) -> None:
        """Flush, checkpoint the end (so the next open scans nothing), close. Idempotent."""
        with self._write_lock:
            return self._close_locked()

    def _close_locked(self) -> None:
        if self._closed:
            return
        try:
            active = self._segments[-1]
            active.flush()
            active.flush_index()
            self._write_recovery_point(
                RecoveryPoint(active.base_offset, active.size_bytes, self._next_offset)
            )
        finally:
            self._closed = True
            for segment in self._segments:
                segment.close()

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
        for attempt in range(1, READ_ATTEMPTS_MAX + 1):
            state = self._snapshot()
            try:
                return self._read_once(state, offset, max_bytes)
            except CorruptLogError:
                with self._write_lock:  # a truncation under way finishes and publishes first
                    cut = self._snapshot() is not state and self._truncations > 0
                if not cut or attempt == READ_ATTEMPTS_MAX:
                    raise
        raise AssertionError("unreachable")

    def _read_once(self, state: _Published, offset: int, max_bytes: int) -> bytes:
        if offset == state.log_end_offset:
            return b""
        self._check_range(state, offset)
        segment, end_position = self._segment_for(state, offset)
        position, header = self._find_batch(segment, offset, end_position)
        limit_position = position + max(max_bytes, 0)
        stop = self._repairing(
            segment,
            lambda: segment.boundary_at_or_before(
                position, header.base_offset, limit_position, end_position
            ),
        )
        data = segment.read(position, stop - position)
        if not segment.checked.covers(position, stop):
            self._check_read(segment, data, position, header.base_offset)
            segment.checked.add(position, stop)
        return data

    @staticmethod
    def _check_read(segment: Segment, data: bytes, position: int, first_offset: int) -> None:
        """Validate every batch of ``data`` (read at ``position``): CRC, header, offsets."""
        index = 0
        expected_offset = first_offset
        while index < len(data):
            try:
                header = validate_batch(data, index)
                if header.base_offset != expected_offset:
                    raise CorruptBatchError(
                        f"batch base offset is {header.base_offset}, expected {expected_offset}"
                    )
            except CorruptBatchError as error:
                raise CorruptLogError(
                    f"{segment.path}: the batch at position {position + index} (offset "
                    f"{expected_offset} on) is damaged: {error}. It was not served. The bytes "
                    "changed on disk after they were written (bit rot, a lost or misdirected "
                    "write); offsets before it can still be read. Copy the partition directory "
                    "aside and restore the segment from a backup or replica",
                    str(segment.path),
                    position + index,
                ) from None
            index += header.size_bytes
            expected_offset = header.next_offset

    def iter_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches from the one holding ``from_offset`` to the end (at the call).

        Each batch is CRC-checked before its header is yielded (once per process, as
        ``read`` checks: bytes recovery or an earlier read checked are not read again),
        because callers act on the headers (producer sequences, a copy's recognition):
        a damaged batch raises CorruptLogError naming the segment and position, as
        ``read`` does, and its header is never yielded.
        """
        state = self._snapshot()
        if from_offset == state.log_end_offset:
            return iter(())
        self._check_range(state, from_offset)
        return self._headers_from(state, from_offset)

    def _headers_from(self, state: _Published, from_offset: int) -> Iterator[BatchHeader]:
        first = bisect_right(state.base_offsets, from_offset) - 1
        segment, end_position = self._segment_for(state, from_offset)
        position, header = self._find_batch(segment, from_offset, end_position)
        expected_offset = header.base_offset
        for number in range(first, len(state.segments)):
            segment = state.segments[number]
            if number > first and segment.base_offset != expected_offset:
                earlier = state.segments[number - 1]
                raise CorruptLogError(
                    f"{earlier.path} ends at offset {expected_offset}, but the next segment "
                    f"starts at {segment.base_offset}: batches are missing from the end of "
                    f"{earlier.path.name} (position {earlier.size_bytes}). Restore it from a "
                    "backup or replica",
                    str(earlier.path),
                    earlier.size_bytes,
                )
            end_position = self._end_of(state, number)
            for batch_position, header in segment.headers(position, end_position, expected_offset):
                self._check_unchecked_batch(segment, batch_position, header)
                yield header
                expected_offset = header.next_offset
            position = 0

    def _check_unchecked_batch(self, segment: Segment, position: int, header: BatchHeader) -> None:
        end_position = position + header.size_bytes
        if not segment.checked.covers(position, end_position):
            data = segment.read(position, header.size_bytes)
            self._check_read(segment, data, position, header.base_offset)
            segment.checked.add(position, end_position)

    def last_batch_header(self) -> BatchHeader | None:
        return self._snapshot().last_header

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """Base offset of the first batch whose max timestamp is >= ``timestamp_ms``, or None."""
        state = self._snapshot()
        for number, segment in enumerate(state.segments):
            end_position = self._end_of(state, number)
            if end_position == 0 or segment.tail().max_timestamp_ms < timestamp_ms:
                continue  # nothing here reaches it (timestamps need not grow across segments)
            offset = self._repairing(
                segment, partial(segment.offset_for_timestamp, timestamp_ms, end_position)
            )
            if offset is not None:
                return max(offset, state.log_start_offset)
        return None

    def size_bytes(self) -> int:
        state = self._snapshot()
        return sum(segment.size_bytes for segment in state.segments[:-1]) + state.end_position

    def check(self) -> None:
        """Assert the log's invariants (for tests and tools; costs a walk per segment end)."""
        self._check_open()
        segments = self._segments
        for earlier, later in pairwise(segments):
            assert earlier.base_offset < later.base_offset, (earlier, later)
            assert earlier.tail().next_offset == later.base_offset, (earlier, later)
        for segment in segments:
            assert os.stat(segment.path).st_size == segment.size_bytes, segment
            entry = segment.index.last_entry_before(segment.size_bytes + 1)
            assert entry is None or entry[1] < segment.size_bytes, segment
        assert segments[-1].tail().next_offset == self._next_offset
        assert self._log_start_offset <= self._next_offset
        state = self._published
        assert state.log_end_offset == self._next_offset
        assert state.end_position == segments[-1].size_bytes
        assert state.segments == tuple(segments)

    # --- internals ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"the data log in {self.directory} is closed; open it again")

    def _snapshot(self) -> _Published:
        self._check_open()
        return self._published

    def _publish(self) -> None:
        if self._segments_to_publish is None:
            segments = tuple(self._segments)
            self._segments_to_publish = segments, tuple(segment.base_offset for segment in segments)
        segments, base_offsets = self._segments_to_publish
        self._published = _Published(
            segments,
            base_offsets,
            segments[-1].size_bytes,
            self._log_start_offset,
            self._next_offset,
            self._last_header,
        )

    def _check_batch(self, view: memoryview, validate: bool) -> BatchHeader:
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
        if size_bytes > self.config.batch_bytes_max:
            raise BatchTooLargeError(
                f"batch is {size_bytes} bytes, larger than this log's batch_bytes_max of "
                f"{self.config.batch_bytes_max}: split it, or raise batch_bytes_max "
                "(topic config max.message.bytes)"
            )

    def _write(self, views: list[memoryview], header: BatchHeader) -> tuple[Segment, int]:
        """Write one checked batch at the log end (rolling first if due); (segment, position).

        The batch gets its offsets and this log's leader epoch by a patch of its first
        16 bytes (outside the CRC); the epoch's start is recorded first if it is new.
        """
        header = header._replace(
            base_offset=self._next_offset, partition_leader_epoch=self._leader_epoch
        )
        if self._leader_epoch > self.epochs.latest_epoch:  # a log truncated below its start
            self.epochs.assign(self._leader_epoch, header.base_offset)
        active = self._segments[-1]
        if self._roll_due(active, header):
            active = self._roll()
        position = active.append(
            [
                *with_log_position(views[0], header.base_offset, header.partition_leader_epoch),
                *views[1:],
            ],
            header,
        )
        self._next_offset = header.next_offset
        self._last_header = header
        return active, position

    def _roll_due(self, active: Segment, header: BatchHeader) -> bool:
        if active.size_bytes == 0:
            return False  # an empty segment takes any batch, however large or old
        if active.size_bytes + header.size_bytes > self.config.segment_bytes:
            return True
        if header.last_offset - active.base_offset > RELATIVE_OFFSET_MAX:
            return True  # relative offsets in the index are u32
        first_timestamp_ms = active.first_batch_max_timestamp_ms
        if first_timestamp_ms is not None and first_timestamp_ms >= 0:
            waited_ms = header.max_timestamp_ms - first_timestamp_ms  # Kafka's rule
        else:
            waited_ms = wall_clock_ms() - active.created_ms
        return waited_ms > self.config.segment_ms

    def _roll(self) -> Segment:
        """Seal the active segment and start a new one at the log end."""
        old = self._segments[-1]
        try:
            old.seal()
            new = Segment.create(
                self.directory, self._next_offset, self.config.index_interval_bytes
            )
        except OSError as error:
            old.open_for_append()
            old.raise_disk_full_or(error, "rolling to a new segment", old.size_bytes)
        self._segments.append(new)
        self._segments_to_publish = None
        fsync_directory(self.directory)
        self._write_recovery_point(RecoveryPoint(new.base_offset, 0, new.base_offset))
        return new

    def _after_flush(self) -> None:
        self._flush_policy.note_flushed()
        self._move_recovery_point(
            self._segments[-1], self._segments[-1].size_bytes, self._next_offset
        )

    def _move_recovery_point(self, active: Segment, position: int, next_offset: int) -> None:
        """``active`` is durable up to ``position`` (where ``next_offset`` starts): checkpoint
        that as the recovery point when the last one is far enough behind."""
        point = self._recovery_point
        if (
            point.segment_base_offset == active.base_offset
            and position - point.position < RECOVERY_POINT_INTERVAL_BYTES
        ):
            return
        active.flush_index()
        self._write_recovery_point(RecoveryPoint(active.base_offset, position, next_offset))

    def _write_recovery_point(self, point: RecoveryPoint, best_effort: bool = True) -> None:
        """Checkpoint ``point``. Moving it forward is an optimisation: if the write fails
        (a full disk), the older point stays, still true, and the next open scans more.
        Moving it back (``best_effort=False``, before a truncation) must succeed."""
        if point == self._recovery_point:
            return
        if not best_effort:
            retract_recovery_point(self.directory, point)
        elif not try_write_recovery_point(self.directory, point):
            return
        self._recovery_point = point

    def _undo_last_append(self, segment: Segment, position: int) -> None:
        segment.undo_append(position)
        tail = segment.tail()
        self._next_offset = tail.next_offset
        self._last_header = tail.last_header or self._last_header_before(segment)

    def _last_header_before(self, segment: Segment) -> BatchHeader | None:
        number = self._segments.index(segment)
        return self._segments[number - 1].tail().last_header if number else None

    def _roll_back_to(self, offset: int) -> None:
        if offset != self._next_offset:
            self._truncate(offset)

    def _truncate(self, offset: int) -> int:
        """Cut the log (writer view) back to ``offset``, a batch boundary; return bytes removed."""
        self._truncations += 1  # first: a compaction must not swap over a half-done cut
        number = bisect_right([segment.base_offset for segment in self._segments], offset) - 1
        segment = self._segments[number]
        if offset == segment.base_offset and number > 0:
            keep = number  # the whole segment goes; the one before becomes active
            cut_segment = self._segments[number - 1]
            cut_position = cut_segment.size_bytes
        else:
            position, header = self._find_batch(segment, offset, segment.size_bytes)
            if header.base_offset != offset:
                raise ValueError(
                    f"offset {offset} is inside the batch holding offsets {header.base_offset}.."
                    f"{header.last_offset}; truncate_to needs a batch boundary, such as "
                    f"{header.base_offset} or {header.next_offset}"
                )
            keep, cut_segment, cut_position = number + 1, segment, position
        removed_bytes = (
            cut_segment.size_bytes
            - cut_position
            + sum(later.size_bytes for later in self._segments[keep:])
        )
        point = self._recovery_point
        if (point.segment_base_offset, point.position) > (cut_segment.base_offset, cut_position):
            # The recovery point lies in what goes: move it to the cut first. What
            # stays must be durable before it says so; a sealed segment already is
            # (sealing fsyncs data and indexes), so a rollback after a failed fsync
            # fsyncs nothing here.
            if cut_segment is self._segments[-1]:
                cut_segment.flush()
                cut_segment.flush_index()
            try:
                self._write_recovery_point(
                    RecoveryPoint(cut_segment.base_offset, cut_position, offset), best_effort=False
                )
            except OSError as error:
                cut_segment.raise_disk_full_or(
                    error, "moving the recovery point before a truncation", cut_position
                )
        for later in reversed(self._segments[keep:]):  # last first: a crash leaves a prefix
            later.delete()
        del self._segments[keep:]
        self._segments_to_publish = None
        fsync_directory(self.directory)
        cut_segment.truncate(cut_position)
        self.epochs.truncate_from_end(offset)  # after the cut: a crash between, open trims it
        self._next_offset = offset
        self._last_header = cut_segment.tail().last_header or self._last_header_before(cut_segment)
        return removed_bytes

    @staticmethod
    def _check_range(state: _Published, offset: int) -> None:
        if not state.log_start_offset <= offset < state.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range: the log holds offsets "
                f"{state.log_start_offset}..{state.log_end_offset} (end exclusive)",
                state.log_start_offset,
                state.log_end_offset,
            )

    @staticmethod
    def _end_of(state: _Published, number: int) -> int:
        segment = state.segments[number]
        return state.end_position if number == len(state.segments) - 1 else segment.size_bytes

    def _segment_for(self, state: _Published, offset: int) -> tuple[Segment, int]:
        number = bisect_right(state.base_offsets, offset) - 1
        return state.segments[number], self._end_of(state, number)

    def _find_batch(
        self, segment: Segment, offset: int, end_position: int
    ) -> tuple[int, BatchHeader]:
        found = self._repairing(segment, lambda: segment.find_batch(offset, end_position))
        if found is None:
            raise CorruptLogError(
                f"{segment.path} has no batch holding offset {offset} before position "
                f"{end_position}, though the log says it should: batches are missing from the "
                "segment (was it cut short?). Restore it from a backup or replica",
                str(segment.path),
                end_position,
            )
        return found

    def _repairing(self, segment: Segment, lookup: Callable[[], Result]) -> Result:
        """``lookup()``; if the segment's index proves damaged, rebuild it and look again.

        Indexes are derived data: a wrong entry costs one validating scan of the
        segment (which raises CorruptLogError if the segment itself is bad).
        """
        index = segment.index
        try:
            return lookup()
        except IndexDamagedError as damage:
            self._rebuild_index(segment, index, str(damage))
        try:
            return lookup()
        except IndexDamagedError as damage:
            raise CorruptLogError(
                f"{segment.path}: its index is still inconsistent after a rebuild ({damage}); "
                "the segment changed while it was read",
                str(segment.path),
                0,
            ) from None

    def _rebuild_index(self, segment: Segment, damaged: object, why: str) -> None:
        with self._write_lock:
            self._check_open()
            if segment.index is not damaged:
                return  # another reader rebuilt it meanwhile
            if segment not in self._segments:
                raise OffsetOutOfRangeError(
                    f"{segment.path} was deleted or replaced (retention or compaction) while "
                    "it was read; fetch again",
                    self._log_start_offset,
                    self._next_offset,
                )
            logger.warning("rebuilding the indexes of %s: %s", segment.path, why)
            index, _ = segment.rebuild_index()
            segment.set_index(index)
