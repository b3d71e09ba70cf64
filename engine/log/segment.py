"""One segment of a data log: a .log file of whole batches and its sparse indexes.

A segment file is nothing but record batches laid end to end, exactly as
``twinlog.engine.records.batch_format`` describes them, with their base offsets assigned by the
log; no file header, no padding. Its name is its base offset (files.py).
Vocabulary: an *offset* numbers a record; a *position* is a byte in this file;
the *base offset* of the segment is the offset of its first batch.

Thread rule: the log's writer thread calls the writing methods (``append``,
``flush``, ``seal``, ``truncate``, ``delete``). Readers call the lookups and
``read`` at the same time, passing the end position they may see (the log
publishes it after each append), and read through their own read-only fd with
``os.pread``, so they never depend on a shared file position.

Descriptors are opened on first use, not when the segment is: the read fd at the
first read, the write fd at the first append (the indexes' likewise). A broker holds
every partition of its cluster, most of them idle, and an idle partition's logs then
hold no descriptor at all; opened eagerly, each partition took 8 (a data log and a
journal log, each a segment opened twice and two index files), so a process limit of
20,000 open files capped a cluster at about 2,400 partitions.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from twinlog.engine.base import failpoints, fsync_latency
from twinlog.engine.base.descriptors import (
    FileIdentity,
    check_same_file,
    identity_of,
    open_same_file,
)
from twinlog.engine.base.errors import CorruptBatchError, CorruptLogError, DiskFullError
from twinlog.engine.log.checked_ranges import CheckedRanges
from twinlog.engine.log.files import (
    index_path,
    segment_path,
    time_index_path,
)
from twinlog.engine.log.headers import iter_headers
from twinlog.engine.log.scan import ScanResult, scan_batches
from twinlog.engine.log.segment_index import IndexDamagedError, SegmentIndex
from twinlog.engine.records.batch_format import (
    NO_TIMESTAMP,
    RECORDS_OFFSET,
    BatchHeader,
    validate_batch,
)
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.records.decompression_budget import DecompressionBudget, section_reserved

logger = logging.getLogger(__name__)

# OSError numbers that mean "no room": a full disk, or a full quota.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class SegmentTail:
    """What the end of a segment holds: enough to append after it and to judge its age."""

    next_offset: int  # base offset the next batch appended here gets
    last_header: BatchHeader | None  # None while the segment is empty
    max_timestamp_ms: int  # largest batch max timestamp in the segment, NO_TIMESTAMP if none


def _pwritev_all(fd: int, pieces: Sequence[bytes | memoryview], position: int) -> None:
    """Write every piece at ``position``, going on after a short write."""
    buffers = [memoryview(piece) for piece in pieces]
    while buffers:
        written = os.pwritev(fd, buffers, position)
        position += written
        while buffers and written >= len(buffers[0]):
            written -= len(buffers[0])
            buffers.pop(0)
        if buffers and written:
            buffers[0] = buffers[0][written:]


class Segment:
    """A segment file, its indexes and (while it is the active segment) its write fd.

    Invariants: ``_write_fd >= 0`` only while ``_active``; once ``_closed`` no
    descriptor is opened again. Every write goes through ``_write_fd``, which stays
    open from the first append until the seal or close, so an active segment without
    one has written nothing that awaits an fsync.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        size_bytes: int,
        index_interval_bytes: int,
        index: SegmentIndex | None = None,
        identity: FileIdentity | None = None,
    ) -> None:
        """``identity``: the file's, when the caller has just stat'ed it."""
        self.directory = directory
        self.base_offset = base_offset
        self.path = segment_path(directory, base_offset)
        self.size_bytes = size_bytes  # the writer's view; readers use the published end
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = wall_clock_ms()  # age fallback when batches carry no timestamp
        self.first_batch_max_timestamp_ms: int | None = None  # roll-by-age basis (active only)
        self._tail: SegmentTail | None = None  # computed on first use for sealed segments
        self._index = index  # loaded on first use for sealed segments
        self._index_lock = threading.Lock()  # readers may race to load it
        self._fd_lock = threading.Lock()  # readers may race to open the read fd
        self._read_fd = -1  # opened by the first read
        self._write_fd = -1  # opened by the first append while active
        self._active = False
        self._closed = False
        # The file the path named when this segment was made: a descriptor opened later by
        # name must reach it (``open_same_file``), or this segment reads and writes nothing.
        self._identity = identity if identity is not None else identity_of(self.path)
        # Bytes whose batches this process has CRC-checked (appended, scanned, or read).
        self.checked = CheckedRanges()

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, {self.size_bytes} bytes)"

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> Segment:
        """A segment file already on disk; its size is the file's, its index loads on first use."""
        status = os.stat(segment_path(directory, base_offset))  # one stat: size and identity
        return cls(
            directory,
            base_offset,
            status.st_size,
            index_interval_bytes,
            identity=(status.st_dev, status.st_ino),
        )

    @property
    def read_fd(self) -> int:
        """The read-only descriptor, opened on first use (any thread)."""
        fd = self._read_fd
        if fd < 0:
            with self._fd_lock:
                if self._closed:
                    raise OSError(errno.EBADF, f"{self.path} is closed")
                if self._read_fd < 0:
                    self._read_fd = open_same_file(self.path, os.O_RDONLY, self._identity)
                fd = self._read_fd
        return fd

    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> Segment:
        """New empty segment files, active (appended to). The caller fsyncs the directory.

        On failure (a full disk) whatever this call created is removed again.
        """
        path = segment_path(directory, base_offset)
        # O_EXCL: a leftover file of the same name would hold stale batches; refuse it.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
        try:
            index = SegmentIndex.create(
                index_path(directory, base_offset), time_index_path(directory, base_offset)
            )
            segment = cls(directory, base_offset, 0, index_interval_bytes, index)
        except BaseException:
            for created in (
                path,
                index_path(directory, base_offset),
                time_index_path(directory, base_offset),
            ):
                created.unlink(missing_ok=True)
            raise
        segment._active = True
        segment._tail = SegmentTail(base_offset, None, NO_TIMESTAMP)
        return segment

    # --- indexes and tail ------------------------------------------------------

    @property
    def index(self) -> SegmentIndex:
        index = self._index
        if index is None:
            with self._index_lock:
                if self._index is None:
                    # Its index files are loaded by name too: not another replica's.
                    check_same_file(self.path, self._identity)
                    self._index = self._load_or_rebuild_index()
                index = self._index
        return index

    def set_index(self, index: SegmentIndex) -> None:
        with self._index_lock:
            if self._index is not None:
                self._index.close()
            self._index = index

    def _load_or_rebuild_index(self) -> SegmentIndex:
        try:
            index = SegmentIndex.load(
                index_path(self.directory, self.base_offset),
                time_index_path(self.directory, self.base_offset),
                self.size_bytes,
            )
            try:
                self._tail = self.verified_tail(index, self.size_bytes)
            except IndexDamagedError:
                index.close()
                raise
            return index
        except IndexDamagedError as damage:
            logger.warning("rebuilding the indexes of %s: %s", self.path, damage)
        index, _ = self.rebuild_index()
        return index

    def verified_tail(self, index: SegmentIndex, end_position: int) -> SegmentTail:
        """The tail of ``[0, end_position)``, checking ``index`` where it is cheap to check.

        The last entry before ``end_position`` must point at a batch with the
        offset it claims, and no batch after it may lack an entry the index
        point rule would have given it (a lost entry at the end). Raises
        IndexDamagedError.
        """
        entry = index.last_entry_before(end_position)
        entry_position = entry[1] if entry else 0
        max_timestamp_ms = entry[2] if entry else NO_TIMESTAMP
        last_header = None
        if end_position <= 0:  # an empty segment: nothing to walk, no read
            return SegmentTail(self.base_offset, None, NO_TIMESTAMP)
        try:
            for position, header in iter_headers(self.read_fd, entry_position, end_position):
                if entry and position == entry_position:
                    if header.base_offset != self.base_offset + entry[0]:
                        raise IndexDamagedError(
                            f"the index entry for position {position} says offset "
                            f"{self.base_offset + entry[0]}, the batch there has base offset "
                            f"{header.base_offset}"
                        )
                elif position - entry_position >= self.index_interval_bytes:
                    raise IndexDamagedError(f"the batch at position {position} has no index entry")
                last_header = header
                max_timestamp_ms = max(max_timestamp_ms, header.max_timestamp_ms)
        except CorruptBatchError as error:
            raise IndexDamagedError(f"walking from the last index entry failed: {error}") from None
        next_offset = last_header.next_offset if last_header else self.base_offset
        return SegmentTail(next_offset, last_header, max_timestamp_ms)

    def rebuild_index(self) -> tuple[SegmentIndex, int]:
        """New index files from a validating scan of the whole segment; (index, batches checked).

        Raises CorruptLogError if a batch is bad: a sealed segment has no torn tail.
        """
        index = SegmentIndex.create(
            index_path(self.directory, self.base_offset),
            time_index_path(self.directory, self.base_offset),
        )
        result = self.scan_and_index(index, 0, self.base_offset)
        if result.bad_position is not None:
            index.close()
            raise CorruptLogError(
                f"{self.path} holds a bad batch at position {result.bad_position} "
                f"({result.bad_reason}); restore the segment from a replica or backup",
                str(self.path),
                result.bad_position,
            )
        index.flush()
        return index, result.batches_checked

    def scan_and_index(
        self, index: SegmentIndex, start_position: int, expected_next_offset: int
    ) -> ScanResult:
        """Validate batches from ``start_position`` on, adding index entries as append would.

        ``index`` must hold exactly the entries before ``start_position``. Stops at
        the first bad batch; the result says where.
        """
        max_timestamp_ms = self.summarize(index, start_position).max_timestamp_ms

        def add_entry(position: int, header: BatchHeader) -> None:
            nonlocal max_timestamp_ms
            max_timestamp_ms = max(max_timestamp_ms, header.max_timestamp_ms)
            if index.is_index_point(position, self.index_interval_bytes):
                index.append(header.base_offset - self.base_offset, position, max_timestamp_ms)

        file_bytes = os.stat(self.path).st_size
        if start_position >= file_bytes:  # nothing to scan (an empty segment: no read)
            return ScanResult(start_position, expected_next_offset)
        result = scan_batches(
            self.read_fd, start_position, file_bytes, expected_next_offset, add_entry
        )
        self.checked.add(start_position, result.end_position)
        return result

    def tail(self) -> SegmentTail:
        tail = self._tail
        if tail is None:
            tail = self._tail = self.summarize(self.index, self.size_bytes)
        return tail

    def summarize(self, index: SegmentIndex, end_position: int) -> SegmentTail:
        """The tail of ``[0, end_position)``: walk from the last index entry before it.

        If that entry does not point at the batch it names (a damaged index), walk
        from position 0 instead; readers repair the index when they meet it.
        """
        entry = index.last_entry_before(end_position)
        try:
            return self._summarize_from(entry, end_position)
        except IndexDamagedError as damage:
            logger.warning("%s: %s; walking the segment from position 0", self.path, damage)
            return self._summarize_from(None, end_position)

    def _summarize_from(self, entry: tuple[int, int, int] | None, end_position: int) -> SegmentTail:
        max_timestamp_ms = entry[2] if entry else NO_TIMESTAMP
        last_header = None
        for _, header in self._walk(entry[:2] if entry else None, end_position):
            last_header = header
            max_timestamp_ms = max(max_timestamp_ms, header.max_timestamp_ms)
        next_offset = last_header.next_offset if last_header else self.base_offset
        return SegmentTail(next_offset, last_header, max_timestamp_ms)

    def forget_tail(self) -> None:
        """Recompute the tail on next use (after recovery changed the segment)."""
        self._tail = None

    def largest_timestamp_ms(self) -> int:
        """The newest batch timestamp here (for retention by age); file mtime if there is none."""
        max_timestamp_ms = self.tail().max_timestamp_ms
        if max_timestamp_ms >= 0:
            return max_timestamp_ms
        return os.stat(self.path).st_mtime_ns // 1_000_000

    # --- writing (writer thread) ---------------------------------------------------

    def open_for_append(self) -> None:
        """Make this the active segment (after open or after truncate_to reopened it)."""
        self._active = True
        tail = self.tail()
        if self.size_bytes and self.first_batch_max_timestamp_ms is None:
            _, first = next(self._headers(0, self.size_bytes))
            self.first_batch_max_timestamp_ms = first.max_timestamp_ms
        assert tail.next_offset >= self.base_offset

    def append(self, pieces: Sequence[bytes | memoryview], header: BatchHeader) -> int:
        """Write one batch (``header`` carries its assigned base offset); return its position.

        On any OSError the segment is cut back to its size before the call, so no
        half-written batch stays; ENOSPC/EDQUOT become DiskFullError.
        """
        tail = self.tail()
        assert header.base_offset == tail.next_offset, "offsets must be contiguous"
        position = self.size_bytes
        max_timestamp_ms = max(tail.max_timestamp_ms, header.max_timestamp_ms)
        write_fd = self._append_fd()  # before the try: an open that fails wrote nothing
        try:
            failpoints.hit("log.before_write")
            _pwritev_all(write_fd, pieces, position)
            if self.index.is_index_point(position, self.index_interval_bytes):
                self.index.append(header.base_offset - self.base_offset, position, max_timestamp_ms)
        except OSError as error:
            self.undo_append(position)
            self.raise_disk_full_or(error, f"writing {header.size_bytes} bytes", position)
        self.size_bytes = position + header.size_bytes
        self.checked.add(position, self.size_bytes)  # the log checked it before writing
        self._tail = SegmentTail(header.next_offset, header, max_timestamp_ms)
        if position == 0:
            self.first_batch_max_timestamp_ms = header.max_timestamp_ms
        return position

    def _append_fd(self) -> int:
        assert self._active and not self._closed, "append to a segment that is not active"
        if self._write_fd < 0:
            self._write_fd = open_same_file(self.path, os.O_RDWR, self._identity)
        return self._write_fd

    def undo_append(self, position: int) -> None:
        """Cut data and index back to ``position`` after a failed write or fsync."""
        os.ftruncate(self._append_fd(), position)
        self.index.truncate_from_position(position)
        self.checked.cut(position)
        self.size_bytes = position
        self._tail = self.summarize(self.index, position)
        if position == 0:
            self.first_batch_max_timestamp_ms = None

    def raise_disk_full_or(self, error: OSError, doing: str, position: int) -> NoReturn:
        if error.errno in DISK_FULL_ERRNOS:
            raise DiskFullError(
                f"disk full while {doing} at position {position} of {self.path}: nothing was "
                f"kept (the segment is back at {position} bytes). Free space on that volume, or "
                "lower retention_bytes / retention_ms, then retry"
            ) from error
        raise error

    def flush(self) -> None:
        """fsync the data written so far (not the indexes: recovery rebuilds those).

        Without a write fd nothing was written here since the segment was opened."""
        if self._write_fd >= 0:
            fsync_segment_fd(self._write_fd)

    def duplicate_write_fd(self) -> int:
        """A duplicate of the append descriptor (the caller closes it), or -1 when sealed
        or not written since it was opened (nothing to fsync either way).

        For an fsync made outside the log's lock: a roll, truncation or close meanwhile
        closes the segment's own descriptor, never this one.
        """
        return os.dup(self._write_fd) if self._write_fd >= 0 else -1

    def flush_index(self) -> None:
        self.index.flush()

    def seal(self) -> None:
        """Stop appending here: fsync data and indexes, close the write fd."""
        self.flush()
        self.flush_index()
        self.close_for_writing()

    def truncate(self, position: int) -> None:
        """Drop every byte from ``position`` (a batch boundary) on, fsync, and reopen for append."""
        self._active = True  # the cut segment is the log's end: appends go on here
        write_fd = self._append_fd()
        self.index.truncate_from_position(position)
        os.ftruncate(write_fd, position)
        self.checked.cut(position)
        os.fsync(write_fd)
        self.index.flush()
        self.size_bytes = position
        self._tail = self.summarize(self.index, position)
        self.first_batch_max_timestamp_ms = None
        self.open_for_append()

    def delete(self) -> None:
        """Unlink the files. Open read fds stay valid (POSIX), so racing readers finish:
        the read fd is opened first if no read has opened it yet."""
        self.close_for_writing()
        self.keep_for_readers()
        for path in (
            self.path,
            index_path(self.directory, self.base_offset),
            time_index_path(self.directory, self.base_offset),
        ):
            path.unlink(missing_ok=True)

    def keep_for_readers(self) -> None:
        """Open the read fd now, before this file is unlinked or renamed over (retention,
        truncation, a compaction's swap): readers holding this segment then go on reading
        these bytes, never whatever file takes the name."""
        try:
            self.read_fd  # noqa: B018 (the property opens it)
        except OSError:
            pass  # closed already, or gone: no reader can use it either way

    def close_for_writing(self) -> None:
        self._active = False
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    def close(self) -> None:
        self.close_for_writing()
        if self._index is not None:
            self._index.close()
        with self._fd_lock:
            self._closed = True
            if self._read_fd >= 0:
                os.close(self._read_fd)
                self._read_fd = -1

    def __del__(self) -> None:
        # Segments dropped by retention are not closed explicitly, because a
        # reader may still hold them; CPython frees them when the last one lets go.
        try:
            self.close()
        except Exception:  # at interpreter exit os may be half torn down
            pass

    # --- lookups (any thread; ``end_position`` is what the caller may see) ---------
    #
    # Every walk checks offset continuity (a batch's base offset is outside its
    # CRC): it starts at position 0 (the segment's base offset) or at an index
    # entry (the offset the entry names), and each batch must start at the next
    # offset of the one before. A walk whose first batch is not where its index
    # entry says raises IndexDamagedError (the index is derived data: the caller
    # rebuilds it); any other bad header raises CorruptLogError naming the file
    # and position.

    def _walk(
        self,
        entry: tuple[int, int] | None,
        end_position: int,
        *,
        entry_from_index: bool = True,
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``entry`` ((relative offset, position),
        or None for the segment start) to ``end_position``, offsets checked.

        ``entry_from_index=False``: ``entry`` is the caller's own knowledge (a batch
        it found before), not an index entry, so a bad first batch is damage to the
        segment (CorruptLogError), not to the index: rebuilding the index would not
        change the walk, and callers do not catch IndexDamagedError for it.
        """
        if entry is None:
            start_position, expected_offset = 0, self.base_offset
        else:
            start_position, expected_offset = entry[1], self.base_offset + entry[0]
        blame_index = entry is not None and entry_from_index
        if start_position >= end_position:
            return
        headers = iter_headers(self.read_fd, start_position, end_position)
        position = previous_position = start_position
        try:
            for position, header in headers:
                if header.base_offset != expected_offset:
                    if blame_index and position == start_position:
                        raise IndexDamagedError(
                            f"the index entry for position {position} of {self.path} names "
                            f"offset {expected_offset}, the batch there has base offset "
                            f"{header.base_offset}"
                        )
                    self._raise_bad_previous(previous_position, position)
                    raise CorruptLogError(
                        f"{self.path}: the batch at position {position} has base offset "
                        f"{header.base_offset}, expected {expected_offset} (the offset after "
                        "the batch before it): the segment is damaged. Copy it aside and "
                        "restore it from a backup or replica",
                        str(self.path),
                        position,
                    )
                yield position, header
                expected_offset = header.next_offset
                previous_position = position
        except CorruptBatchError as error:
            bad_position = error.position if error.position is not None else position
            if blame_index and bad_position == start_position:
                raise IndexDamagedError(
                    f"the index entry for position {start_position} of {self.path} does not "
                    f"point at a batch ({error})"
                ) from None
            raise CorruptLogError(
                f"{self.path}: {error}. The segment is damaged at position {bad_position}: "
                "copy it aside and restore it from a backup or replica",
                str(self.path),
                bad_position,
            ) from error

    def _raise_bad_previous(self, previous_position: int, position: int) -> None:
        """Blame the batch before ``position`` if its CRC fails (its last offset delta,
        inside the CRC, may be what broke the offsets); else return."""
        if previous_position >= position:
            return
        data = os.pread(self.read_fd, position - previous_position, previous_position)
        try:
            validate_batch(data)
        except CorruptBatchError as error:
            raise CorruptLogError(
                f"{self.path}: the batch at position {previous_position} is damaged: {error}. "
                "Copy the segment aside and restore it from a backup or replica",
                str(self.path),
                previous_position,
            ) from None

    def _headers(self, start_position: int, end_position: int) -> Iterator[tuple[int, BatchHeader]]:
        try:
            yield from iter_headers(self.read_fd, start_position, end_position)
        except CorruptBatchError as error:
            position = error.position if error.position is not None else start_position
            raise CorruptLogError(
                f"{self.path}: {error}; the segment changed or rotted after it was checked",
                str(self.path),
                position,
            ) from error

    def headers(
        self, start_position: int, end_position: int, first_offset: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch in ``[start_position, end_position)``.

        With ``first_offset`` (the base offset of the batch at ``start_position``)
        offsets are checked to be contiguous. A bad batch (the first one too)
        raises CorruptLogError naming the file and position.
        """
        if first_offset is None:
            return self._headers(start_position, end_position)
        return self._walk(
            (first_offset - self.base_offset, start_position), end_position, entry_from_index=False
        )

    def find_batch(self, offset: int, end_position: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the batch holding ``offset``, or None if it is not before the end.

        Raises IndexDamagedError if the index entry it starts from is wrong.
        """
        entry = self.index.floor_entry_for_offset(offset - self.base_offset)
        for position, header in self._walk(entry, end_position):
            if header.next_offset > offset:
                return position, header
        return None

    def boundary_at_or_before(
        self, start_position: int, start_offset: int, limit_position: int, end_position: int
    ) -> int:
        """The last batch end in ``(start_position, limit_position]``; at least one batch's end.

        ``start_offset`` is the base offset of the batch at ``start_position``.
        """
        if limit_position >= end_position:
            return end_position
        entry: tuple[int, int] | None = self.index.floor_entry(limit_position)
        if entry is None or entry[1] <= start_position:
            entry = (start_offset - self.base_offset, start_position)
        boundary = entry[1]
        for position, header in self._walk(entry, end_position):
            batch_end = position + header.size_bytes
            if batch_end > limit_position:
                if boundary == start_position:  # the first batch alone is larger than allowed
                    boundary = batch_end
                break
            boundary = batch_end
        return boundary

    def read(self, position: int, size_bytes: int) -> bytes:
        data = os.pread(self.read_fd, size_bytes, position)
        if len(data) != size_bytes:
            raise CorruptLogError(
                f"{self.path}: read {len(data)} bytes at position {position}, expected "
                f"{size_bytes}; the file was cut under the log",
                str(self.path),
                position + len(data),
            )
        return data

    def record_for_timestamp(
        self, timestamp_ms: int, end_position: int, budget: DecompressionBudget | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record here whose timestamp is >=
        ``timestamp_ms`` (Kafka's ListOffsets): the first batch whose max timestamp is,
        then its first such record (an earlier record of that batch may be older). The
        batch is charged to ``budget`` while it is decompressed."""
        entry = self.index.entry_before_timestamp(timestamp_ms)
        for position, header in self._walk(entry, end_position):
            if header.max_timestamp_ms >= timestamp_ms:
                for batch in iter_batches(self.read(position, header.size_bytes)):
                    section = batch.buffer[RECORDS_OFFSET:]
                    with section_reserved(budget, batch.header.codec, section):
                        for record in batch.records():
                            if record.timestamp_ms >= timestamp_ms:
                                return record.offset, record.timestamp_ms
                # not reached: the max is one of its records
                return header.base_offset, header.max_timestamp_ms
        return None


def fsync_segment_fd(fd: int) -> None:
    """fsync a segment's data through ``fd``: the one place segment data is made durable
    (its failpoints and latency histogram are the crash tests' and the metrics')."""
    failpoints.hit("log.before_fsync")
    started_s = time.monotonic()
    os.fsync(fd)
    fsync_latency.LOG_SEGMENT.observe(time.monotonic() - started_s)
    failpoints.hit("log.after_fsync")
