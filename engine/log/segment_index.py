"""The sparse offset index and time index of one segment.

Both files are arrays of fixed-size big-endian entries, one entry per index
point, and the two files always have the same number of entries for the same
batches (entry i of each describes the same batch):

    .index      entry = relative_offset u32 | position u32               (8 bytes)
    .timeindex  entry = max_timestamp_ms i64 | relative_offset u32        (12 bytes)

``relative_offset`` is the batch's base offset minus the segment's base offset;
``position`` is the batch's byte position in the .log file;
``max_timestamp_ms`` is the largest max timestamp of every batch of the segment
up to and including this one (so the column never decreases, as Kafka's).

Index point rule: a batch appended at ``position`` gets an entry when
``position - (position of the last entry, or 0) >= index_interval_bytes``. The
rule depends on positions only, so rebuilding the index from the .log file
gives the same bytes, and the walk from an entry to any batch covers less than
``index_interval_bytes`` plus one batch.

Entries are kept in memory (three arrays, 16 bytes per entry: 4 MiB per GiB of
segment at the default interval) and written through to the files with
``pwrite``; the files are fsynced only when a recovery point is written, since
recovery rebuilds whatever lies after it. Their descriptors are opened by the
first write (lookups use the memory only), so an idle segment holds none.

Thread rule: one writer appends and truncates; readers bisect concurrently.
The writer appends to ``relative_offsets`` last and readers bound their
searches by its length, so a reader never sees half an entry.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from itertools import pairwise
from pathlib import Path

from twinlog.engine.base.descriptors import FileIdentity, identity_of, open_same_file
from twinlog.engine.log.files import fsync_file

OFFSET_ENTRY = struct.Struct(
    ">"
    "I"  # relative_offset: batch base offset - segment base offset
    "I"  # position: byte position of the batch in the segment file
)
TIME_ENTRY = struct.Struct(
    ">"
    "q"  # max_timestamp_ms: largest batch max timestamp so far in this segment
    "I"  # relative_offset: of the batch at which that maximum was recorded
)
OFFSET_ENTRY_BYTES = OFFSET_ENTRY.size
TIME_ENTRY_BYTES = TIME_ENTRY.size
assert OFFSET_ENTRY_BYTES == 8 and TIME_ENTRY_BYTES == 12
assert array("I").itemsize == 4, "array('I') must hold u32 entries"
RELATIVE_OFFSET_MAX = (1 << 32) - 1
POSITION_MAX = (1 << 32) - 1


class IndexDamagedError(Exception):
    """An index file is missing or fails a sanity check; the message says which check."""


def _strictly_increasing(values: array) -> bool:
    return all(earlier < later for earlier, later in pairwise(values))


class SegmentIndex:
    """Both sparse indexes of one segment, in memory and on disk."""

    def __init__(self, offset_path: Path, time_path: Path) -> None:
        self.offset_path = offset_path
        self.time_path = time_path
        self.relative_offsets = array("I")
        self.positions = array("I")
        self.max_timestamps_ms = array("q")
        self._offset_fd = -1  # both opened by the first write, closed by close()
        self._time_fd = -1
        self._unsynced = False  # written (or created) since the last fsync
        # The files the paths named when they were created or loaded (``open_same_file``).
        self._identities: tuple[FileIdentity, FileIdentity] | None = None

    # --- opening -----------------------------------------------------------

    @classmethod
    def create(cls, offset_path: Path, time_path: Path) -> SegmentIndex:
        """Empty index files (replacing any existing ones)."""
        index = cls(offset_path, time_path)
        for path in (offset_path, time_path):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))
        index._identities = (identity_of(offset_path), identity_of(time_path))
        index._unsynced = True  # the emptying of a replaced file is a write
        return index

    @classmethod
    def load(
        cls,
        offset_path: Path,
        time_path: Path,
        segment_bytes: int,
        keep_before_position: int | None = None,
    ) -> SegmentIndex:
        """Read both files and check them; raises IndexDamagedError saying what is wrong.

        With ``keep_before_position`` only the entries before that position are
        kept and checked (the files are cut to them): what lies after a recovery
        point may be torn, and is rebuilt by the scan anyway.
        """
        index = cls(offset_path, time_path)
        try:
            index._identities = (identity_of(offset_path), identity_of(time_path))
            offset_data = offset_path.read_bytes()
            time_data = time_path.read_bytes()
        except FileNotFoundError as error:
            raise IndexDamagedError(f"{error.filename} is missing") from None
        offset_count = len(offset_data) // OFFSET_ENTRY_BYTES
        time_count = len(time_data) // TIME_ENTRY_BYTES
        if keep_before_position is None and (
            offset_count != time_count
            or len(offset_data) % OFFSET_ENTRY_BYTES
            or len(time_data) % TIME_ENTRY_BYTES
        ):
            raise IndexDamagedError(
                f"index files of {len(offset_data)} and {len(time_data)} bytes do not hold the "
                f"same number of whole {OFFSET_ENTRY_BYTES}- and {TIME_ENTRY_BYTES}-byte entries"
            )
        count = min(offset_count, time_count)
        pairs = array("I", offset_data[: count * OFFSET_ENTRY_BYTES])
        if sys.byteorder == "little":
            pairs.byteswap()  # the files are big-endian
        index.relative_offsets = pairs[0::2]
        index.positions = pairs[1::2]
        time_relative_offsets = array("I")
        for max_timestamp_ms, relative_offset in TIME_ENTRY.iter_unpack(
            time_data[: count * TIME_ENTRY_BYTES]
        ):
            index.max_timestamps_ms.append(max_timestamp_ms)
            time_relative_offsets.append(relative_offset)
        if keep_before_position is not None:
            keep = index._increasing_prefix_before(keep_before_position)
            for column in (
                index.relative_offsets,
                index.positions,
                index.max_timestamps_ms,
                time_relative_offsets,
            ):
                del column[keep:]
        index._check(time_relative_offsets, segment_bytes)
        if len(offset_data) != count * OFFSET_ENTRY_BYTES or len(time_data) != count * (
            TIME_ENTRY_BYTES
        ):
            index._cut_files(count)  # torn entries beyond the whole ones
        if keep_before_position is not None:
            index.truncate_from_position(keep_before_position)
        return index

    def _increasing_prefix_before(self, position: int) -> int:
        """How many leading entries have increasing positions, all before ``position``."""
        previous = -1
        for count, entry_position in enumerate(self.positions):
            if not previous < entry_position < position:
                return count
            previous = entry_position
        return len(self.positions)

    def _check(self, time_relative_offsets: array, segment_bytes: int) -> None:
        if time_relative_offsets != self.relative_offsets:
            raise IndexDamagedError("time index entries name other batches than offset index ones")
        if not _strictly_increasing(self.relative_offsets):
            raise IndexDamagedError("offset index relative offsets do not increase")
        if not _strictly_increasing(self.positions):
            raise IndexDamagedError("offset index positions do not increase")
        if self.positions and self.positions[-1] >= segment_bytes:
            raise IndexDamagedError(
                f"last index position {self.positions[-1]} is past the segment's "
                f"{segment_bytes} bytes"
            )
        timestamps = self.max_timestamps_ms
        if any(earlier > later for earlier, later in pairwise(timestamps)):
            raise IndexDamagedError("time index timestamps decrease")

    def _write_fds(self) -> tuple[int, int]:
        """Both descriptors, opened on first use. No O_CREAT: the files exist from
        create() or load(), and a file gone meanwhile must not come back empty."""
        if self._offset_fd < 0:
            assert self._identities is not None, "an index neither created nor loaded"
            offset_identity, time_identity = self._identities
            offset_fd = open_same_file(self.offset_path, os.O_RDWR, offset_identity)
            try:
                self._time_fd = open_same_file(self.time_path, os.O_RDWR, time_identity)
            except BaseException:
                os.close(offset_fd)
                raise
            self._offset_fd = offset_fd
        self._unsynced = True
        return self._offset_fd, self._time_fd

    # --- writing (writer thread) ---------------------------------------------

    @property
    def entry_count(self) -> int:
        return len(self.relative_offsets)

    def is_index_point(self, position: int, index_interval_bytes: int) -> bool:
        """Does a batch appended at ``position`` get an entry (the index point rule)?"""
        last_position = self.positions[-1] if self.positions else 0
        return position - last_position >= index_interval_bytes

    def append(self, relative_offset: int, position: int, max_timestamp_ms: int) -> None:
        assert 0 <= relative_offset <= RELATIVE_OFFSET_MAX and 0 <= position <= POSITION_MAX
        assert not self.positions or (
            position > self.positions[-1] and relative_offset > self.relative_offsets[-1]
        ), "index entries must increase"
        count = self.entry_count
        offset_fd, time_fd = self._write_fds()
        os.pwrite(
            offset_fd,
            OFFSET_ENTRY.pack(relative_offset, position),
            count * OFFSET_ENTRY_BYTES,
        )
        os.pwrite(
            time_fd,
            TIME_ENTRY.pack(max_timestamp_ms, relative_offset),
            count * TIME_ENTRY_BYTES,
        )
        # Order matters for concurrent readers: relative_offsets last (see module doc).
        self.max_timestamps_ms.append(max_timestamp_ms)
        self.positions.append(position)
        self.relative_offsets.append(relative_offset)

    def truncate_from_position(self, position: int) -> None:
        """Drop every entry whose position is ``position`` or later, in memory and on disk.

        The files hold exactly the entries in memory (load cut any torn ones), so a
        cut that drops none writes nothing (and opens no descriptor)."""
        keep = bisect_left(self.positions, position)
        if keep == self.entry_count:
            return
        del self.relative_offsets[keep:]
        del self.positions[keep:]
        del self.max_timestamps_ms[keep:]
        self._cut_files(keep)

    def _cut_files(self, count: int) -> None:
        offset_fd, time_fd = self._write_fds()
        os.ftruncate(offset_fd, count * OFFSET_ENTRY_BYTES)
        os.ftruncate(time_fd, count * TIME_ENTRY_BYTES)

    def flush(self) -> None:
        if not self._unsynced:
            return
        if self._offset_fd < 0:  # created empty, never written: no descriptor to keep
            fsync_file(self.offset_path)
            fsync_file(self.time_path)
        else:
            os.fsync(self._offset_fd)
            os.fsync(self._time_fd)
        self._unsynced = False

    def close(self) -> None:
        for fd in (self._offset_fd, self._time_fd):
            if fd >= 0:
                os.close(fd)
        self._offset_fd = self._time_fd = -1

    # --- lookups (any thread) ------------------------------------------------

    def floor_position_for_offset(self, relative_offset: int) -> int:
        """Position of the last entry whose relative offset is <= ``relative_offset`` (or 0)."""
        count = len(self.relative_offsets)
        entry = bisect_right(self.relative_offsets, relative_offset, 0, count) - 1
        return self.positions[entry] if entry >= 0 else 0

    def floor_position(self, limit_position: int) -> int:
        """The largest entry position <= ``limit_position`` (or 0): a batch boundary."""
        count = len(self.relative_offsets)
        entry = bisect_right(self.positions, limit_position, 0, count) - 1
        return self.positions[entry] if entry >= 0 else 0

    def position_before_timestamp(self, timestamp_ms: int) -> int:
        """Position of the last entry whose max timestamp so far is < ``timestamp_ms`` (or 0).

        Every batch up to that entry's is older than ``timestamp_ms``, so the first
        batch reaching it lies after, before the next entry.
        """
        count = len(self.relative_offsets)
        entry = bisect_left(self.max_timestamps_ms, timestamp_ms, 0, count) - 1
        return self.positions[entry] if entry >= 0 else 0

    def floor_entry_for_offset(self, relative_offset: int) -> tuple[int, int] | None:
        """(relative offset, position) of the last entry whose relative offset is <= the given."""
        count = len(self.relative_offsets)
        entry = bisect_right(self.relative_offsets, relative_offset, 0, count) - 1
        return (self.relative_offsets[entry], self.positions[entry]) if entry >= 0 else None

    def floor_entry(self, limit_position: int) -> tuple[int, int] | None:
        """(relative offset, position) of the last entry whose position is <= ``limit_position``."""
        count = len(self.relative_offsets)
        entry = bisect_right(self.positions, limit_position, 0, count) - 1
        return (self.relative_offsets[entry], self.positions[entry]) if entry >= 0 else None

    def entry_before_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(relative offset, position) of the last entry whose max timestamp so far is
        < ``timestamp_ms`` (see ``position_before_timestamp``)."""
        count = len(self.relative_offsets)
        entry = bisect_left(self.max_timestamps_ms, timestamp_ms, 0, count) - 1
        return (self.relative_offsets[entry], self.positions[entry]) if entry >= 0 else None

    def last_entry_before(self, position: int) -> tuple[int, int, int] | None:
        """(relative_offset, position, max_timestamp_ms) of the last entry before ``position``."""
        count = len(self.relative_offsets)
        entry = bisect_left(self.positions, position, 0, count) - 1
        if entry < 0:
            return None
        return self.relative_offsets[entry], self.positions[entry], self.max_timestamps_ms[entry]
