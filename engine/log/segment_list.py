"""The segments of one data log, in offset order, and every change made to them: Kafka's
LocalLog, under ``DataLog`` as LocalLog is under UnifiedLog.

It owns the segment files of a log directory as recovery left them, and does to them
what the log decides: write a batch at the end (rolling to a new segment when one is
due), move the recovery point after an fsync, cut the tail at an offset, take the
oldest segments out, drop them all and start empty at a later offset, swap sealed
segments for a compacted one, close. After each change its caller publishes what
readers may see (``Published``, segment_reads.py); the reads go through here too.

Its one caller is ``DataLog`` (data_log.py), which decides what is written (offsets,
leader epochs, checked batches), when it is made durable (the flush policy) and which
cut is allowed; the list does it to the files, in an order a crash cannot tear.

Thread rule: every method marked "write lock held" is called with ``write_lock``
held (DataLog's writer calls take it). Reads take the published state and need no
lock; they take it only to rebuild a damaged index or to wait out a truncation.

Invariant (asserted by ``check``): segments are in ascending base offset,
contiguous (each one's next offset is the base offset of the one after it),
and ``log_start_offset <= next_offset``.
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

from twinlog.engine.base.errors import CorruptLogError, LogClosedError, OffsetOutOfRangeError
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
from twinlog.engine.log.recovery import RecoveredLog
from twinlog.engine.log.segment import Segment, fsync_segment_fd, wall_clock_ms
from twinlog.engine.log.segment_index import RELATIVE_OFFSET_MAX
from twinlog.engine.log.segment_reads import (
    Published,
    bytes_from,
    find_batch,
    iter_headers,
    read_batches,
    record_for_timestamp,
    record_with_max_timestamp,
)
from twinlog.engine.log.segments_view import SegmentsView
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.decompression_budget import DecompressionBudget

logger = logging.getLogger(__name__)

# After this many bytes flushed into the active segment, checkpoint a new
# recovery point, so a crash rescans at most this much (plus one flush).
RECOVERY_POINT_INTERVAL_BYTES = 64 << 20
# A read that met a truncation is tried again (each try sees a newer cut, so few suffice).
READ_ATTEMPTS_MAX = 3


class SegmentList:
    """The ordered segments of one log directory; the last one is active (appended to)."""

    def __init__(self, directory: Path, config: LogConfig, recovered: RecoveredLog) -> None:
        self.directory = directory
        self.config = config
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
        self._closed = False
        # (segments, their base offsets) as tuples for publish; None after the list changed.
        # (segments, their base offsets, the bytes of all but the last): remade only when
        # the list changes, not at every append.
        self._segments_to_publish: tuple[tuple[Segment, ...], tuple[int, ...], int] | None = None
        # Serializes writer calls. Readers take it only to rebuild a damaged index.
        self.write_lock = threading.RLock()
        # Compaction: one at a time; it swaps only if no truncation happened since it
        # chose its segments; a swap that failed half-way stops it until the log is
        # reopened (whose recovery finishes the swap).
        self.compaction_turns = CompactionTurns()
        self._truncations = 0
        self.publish()

    # --- state ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def published(self) -> Published:
        """What readers see now (also after ``close``)."""
        return self._published

    @property
    def log_start_offset(self) -> int:
        """The writer's view (write lock held): the first offset still stored."""
        return self._log_start_offset

    @property
    def next_offset(self) -> int:
        """The writer's view (write lock held): the offset the next batch written gets."""
        return self._next_offset

    @property
    def segments(self) -> Sequence[Segment]:
        """The writer's view (write lock held), oldest first."""
        return self._segments

    @property
    def active(self) -> Segment:
        return self._segments[-1]

    @property
    def truncations(self) -> int:
        """Cuts of the tail so far (compaction refuses to swap over a newer one)."""
        return self._truncations

    def check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"the data log in {self.directory} is closed; open it again")

    def snapshot(self) -> Published:
        """What readers see now; LogClosedError if the log is closed."""
        self.check_open()
        return self._published

    def publish(self) -> None:
        """Show readers the list as it is now (write lock held)."""
        if self._segments_to_publish is None:
            segments = tuple(self._segments)
            self._segments_to_publish = (
                segments,
                tuple(segment.base_offset for segment in segments),
                sum(segment.size_bytes for segment in segments[:-1]),
            )
        segments, base_offsets, sealed_bytes = self._segments_to_publish
        self._published = Published(
            segments,
            base_offsets,
            segments[-1].size_bytes,
            self._log_start_offset,
            self._next_offset,
            self._last_header,
            sealed_bytes,
        )

    # --- writing at the end (write lock held) ---------------------------------------

    def append(
        self, pieces: Sequence[bytes | memoryview], header: BatchHeader
    ) -> tuple[Segment, int]:
        """Write one checked batch, its bytes final, at the end (rolling first if due);
        (segment, position). Readers see it after the next ``publish``."""
        active = self._segments[-1]
        if self._roll_due(active, header):
            active = self._roll()
        position = active.append(pieces, header)
        self._next_offset = header.next_offset
        self._last_header = header
        return active, position

    def undo_append(self, segment: Segment, position: int) -> None:
        """Remove the batch ``append`` just wrote at ``position`` of ``segment``."""
        segment.undo_append(position)
        tail = segment.tail()
        self._next_offset = tail.next_offset
        self._last_header = tail.last_header or self._last_header_before(segment)

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

    # --- durability -----------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything written (write lock held); DiskFullError if there is no room."""
        self.check_open()
        active = self._segments[-1]
        try:
            active.flush()
        except OSError as error:
            active.raise_disk_full_or(error, "fsyncing", active.size_bytes)

    def advance_recovery_point(self) -> None:
        """Everything written is durable (write lock held): checkpoint the end as the
        recovery point when the last one is far enough behind."""
        self._move_recovery_point(
            self._segments[-1], self._segments[-1].size_bytes, self._next_offset
        )

    def flush_beside_appends(self) -> int:
        """fsync everything written before the call with the write lock held only around
        it, not through the fsync; the offset below which every batch is now durable."""
        with self.write_lock:
            self.check_open()
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
        with self.write_lock:
            # After a roll the new segment's recovery point is written already; after a
            # truncation (which may have written other bytes at ``position``) or a close,
            # the old one stands. Only an unchanged active segment moves it.
            unchanged = self._truncations == truncations and self._segments[-1] is active
            if not self._closed and unchanged:
                self._move_recovery_point(active, position, end_offset)
        return end_offset

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

    def close(self) -> None:
        """Flush, checkpoint the end (so the next open scans nothing), close (write lock
        held). Idempotent."""
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

    # --- removing segments and bytes (write lock held) ------------------------------

    def cut(self, offset: int) -> int:
        """Cut the tail back to ``offset``, a batch boundary in the log; return bytes removed.
        Not published: the caller publishes (or, undoing an append nobody saw, need not)."""
        self._truncations += 1  # first: a compaction must not swap over a half-done cut
        number = bisect_right([segment.base_offset for segment in self._segments], offset) - 1
        segment = self._segments[number]
        if offset == segment.base_offset and number > 0:
            keep = number  # the whole segment goes; the one before becomes active
            cut_segment = self._segments[number - 1]
            cut_position = cut_segment.size_bytes
        else:
            position, header = find_batch(segment, offset, segment.size_bytes, self._rebuild_index)
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
        self._next_offset = offset
        self._last_header = cut_segment.tail().last_header or self._last_header_before(cut_segment)
        return removed_bytes

    def take_oldest(self, count: int) -> list[Segment]:
        """Take the ``count`` oldest segments (not all) out of the list and publish it; the
        log start moves to the first kept one, checkpointed first (if we crash while the
        files are deleted, open deletes the rest). Their files stay until ``delete``."""
        doomed = self._segments[:count]
        new_start_offset = max(self._segments[count].base_offset, self._log_start_offset)
        write_log_start_offset(self.directory, new_start_offset)
        self._log_start_offset = new_start_offset
        del self._segments[:count]
        self._segments_to_publish = None
        self.publish()
        return doomed

    def advance_start(self, offset: int) -> None:
        """Move the log start up to ``offset`` (not below it, not past the end), inside a
        segment if need be, and publish: readers get OffsetOutOfRangeError below it from
        now on. Checkpointed first, so a restart keeps it; the segments wholly below it are
        the caller's to take out (``take_oldest``, or the next open if we crash first)."""
        assert self._log_start_offset < offset <= self._next_offset, (
            self._log_start_offset,
            offset,
            self._next_offset,
        )
        write_log_start_offset(self.directory, offset)
        self._log_start_offset = offset
        self.publish()

    def delete(self, taken: Sequence[Segment]) -> None:
        """Delete the files of segments ``take_oldest`` took out."""
        for segment in taken:
            segment.delete()  # readers holding it keep reading through their open fd
        fsync_directory(self.directory)

    def start_over_at(self, offset: int) -> int:
        """Drop every segment and start empty at ``offset``, past the end; published.
        Returns the segments dropped.

        Crash order: the log start checkpoint first (recovery then deletes the segments
        wholly below it, and creates the first segment there if none is left), the old
        segments oldest first, then the new segment.
        """
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
        self.publish()
        return len(doomed)

    def _last_header_before(self, segment: Segment) -> BatchHeader | None:
        number = self._segments.index(segment)
        return self._segments[number - 1].tail().last_header if number else None

    # --- compaction's swap (as Kafka's replaceSegments; the API is DataLog's) --------
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
    def segments_view(self) -> Iterator[SegmentsView]:
        """The segments as they are now, for the ``with`` block, which holds the write lock."""
        with self.write_lock:
            self.check_open()
            sealed = tuple(self._segments[:-1])
            view = SegmentsView(
                sealed=sealed,
                sealed_size_bytes=tuple(segment.size_bytes for segment in sealed),
                active=self._segments[-1],
                recovery_point_base_offset=self._recovery_point.segment_base_offset,
                log_end_offset=self._next_offset,
                truncations=self._truncations,
                compaction_turn=self.compaction_turns.held(),
            )
            view.check()
            yield view

    def replace_segments(
        self, old: Sequence[Segment], new: CleanedSegmentWriter, view: SegmentsView
    ) -> bool:
        """Put ``new`` in place of ``old`` (DataLog.replace_segments says when it may)."""
        assert old, "nothing to replace"
        assert view.compaction_turn and view.compaction_turn == self.compaction_turns.held(), (
            "replace_segments needs the compaction turn its view was taken in"
        )
        first_in_view = next((n for n, s in enumerate(view.sealed) if s is old[0]), None)
        assert first_in_view is not None, "the replaced segments come from the view"
        assert list(view.sealed[first_in_view : first_in_view + len(old)]) == list(old)
        assert new.finished and new.base_offset == old[0].base_offset, (new.base_offset, old)
        base_offset, end_offset = new.base_offset, new.next_offset
        with self.write_lock:
            first = self._replaceable_at(old, view, first_in_view, end_offset)
            if first is None:
                new.discard()
                return False
            # A planner read this tail already (it is cached: no file is read here).
            assert old[-1].tail().next_offset == end_offset, (old, end_offset)
            watermarks = self._log_start_offset, self._next_offset
            for segment in old:  # readers holding them read the old bytes, not the new file
                segment.keep_for_readers()
            cleaned = self._swap_in(base_offset, end_offset, new)
            cleaned.checked.add(0, cleaned.size_bytes)  # the caller checked every batch
            self._segments[first : first + len(old)] = [cleaned]
            self._segments_to_publish = None
            if self._segments[-1].size_bytes == 0:  # the last header is that of the one before
                self._last_header = self._last_header_before(self._segments[-1])
            self.publish()
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
            or self.compaction_turns.stopped
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
            self.compaction_turns.stop(
                f"a compaction of offsets {base_offset}..{end_offset} was committed but not "
                f"put in place ({error!r}); reopen the log to finish it"
            )
            raise

    # --- reading (any thread) -------------------------------------------------------

    def bytes_from(self, offset: int) -> int:
        """``DataLog.bytes_from``."""
        return bytes_from(self.snapshot(), offset, self._rebuild_index)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """``DataLog.read``: a read that raced a truncation is read again from the cut log."""
        for attempt in range(1, READ_ATTEMPTS_MAX + 1):
            state = self.snapshot()
            try:
                return read_batches(state, offset, max_bytes, self._rebuild_index)
            except CorruptLogError:
                with self.write_lock:  # a truncation under way finishes and publishes first
                    cut = self.snapshot() is not state and self._truncations > 0
                if not cut or attempt == READ_ATTEMPTS_MAX:
                    raise
        raise AssertionError("unreachable")

    def iter_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        return iter_headers(self.snapshot(), from_offset, self._rebuild_index)

    def record_for_timestamp(
        self, timestamp_ms: int, budget: DecompressionBudget | None = None
    ) -> tuple[int, int] | None:
        return record_for_timestamp(self.snapshot(), timestamp_ms, self._rebuild_index, budget)

    def record_with_max_timestamp(
        self, budget: DecompressionBudget | None = None
    ) -> tuple[int, int] | None:
        return record_with_max_timestamp(self.snapshot(), self._rebuild_index, budget)

    def _rebuild_index(self, segment: Segment, damaged: object, why: str) -> None:
        with self.write_lock:
            self.check_open()
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

    def check(self) -> None:
        """Assert the invariants (for tests and tools; costs a walk per segment end)."""
        self.check_open()
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
