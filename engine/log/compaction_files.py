"""The files of a compaction, and how a crash at any point between them is resolved.

A compaction replaces a run of sealed segments ``S, M1, M2, ...`` (a *group*,
whose offsets are ``[S, E)``) by one cleaned segment named ``S`` holding the
same offsets. Its files go through three names:

    S.log.cleaned   S.index.cleaned   S.timeindex.cleaned    being written (not committed)
    S.log.swap      S.index.swap      S.timeindex.swap       committed, not yet in place
    S.log           S.index           S.timeindex            in place

Steps (``failpoints.hit`` names in brackets):

    1. write the three ``.cleaned`` files (batch by batch [compaction.after_cleaned_batch]),
       fsync them and the directory                        [compaction.after_write_cleaned]
    2. commit: rename the two index files to ``.swap``, then ``S.log.cleaned`` to
       ``S.log.swap``; fsync the directory. ``S.log.swap`` existing IS the commit.
                                                            [compaction.after_commit]
    3. delete the replaced segments ``M1, M2, ...`` (every segment whose base
       offset lies in ``(S, E)``); fsync the directory     [compaction.after_delete_replaced]
    4. rename the index ``.swap`` files over ``S.index`` / ``S.timeindex``; fsync the
       directory                                           [compaction.before_rename_segment]
    5. rename ``S.log.swap`` over ``S.log``; fsync the directory
                                                            [compaction.after_swap]

Recovery rule (``finish_interrupted_compactions``, the first thing a log's
open does):

* a ``.cleaned`` file is an uncommitted compaction: delete it. The original
  segments were not touched before the commit, so the log is the old one.
* ``S.log.swap`` is a committed one: redo steps 3-5. ``E`` is read from the
  swap file itself (a validating scan: it was fsynced before the commit, so a
  bad batch in it is damage, ``CorruptLogError``, and nothing is changed).
  Deleting ``M1, M2, ...`` again, or renaming again, is harmless, so a crash
  during recovery is resolved by the next open the same way. Until step 5 the
  original ``S.log`` stays, so no moment lacks both the old and the new copy of
  an offset.
* index ``.swap`` files without ``S.log.swap`` are left from step 2 of an
  uncommitted compaction (their ``.log`` was still ``.cleaned``): deleted. If
  ``S.log.swap`` exists but its index files do not (step 4 was done, or the
  directory lost a rename), ``S.index`` and ``S.timeindex`` are deleted instead,
  and open rebuilds them from the segment: indexes are derived data, and the
  old ones must never describe the new segment.

Between steps 3 and 5 the directory misses ``[M1, E)``: a ``LogReader``
racing a compaction sees segments that do not follow each other and says so
(OffsetOutOfRangeError: read again), as it does for a segment retention
deleted under it. A
``DataLog``'s readers never look at names: they read through file descriptors
of the segments they were handed, which stay valid.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import CorruptLogError
from twinlog.engine.log.files import (
    fsync_directory,
    index_path,
    list_segment_base_offsets,
    segment_path,
    time_index_path,
)
from twinlog.engine.log.scan import scan_batches
from twinlog.engine.log.segment_index import SegmentIndex
from twinlog.engine.records.batch_format import NO_TIMESTAMP, BatchHeader

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SWAP_SEGMENT_NAME = re.compile(r"^(\d{20})\.log\.swap$")
_SWAP_INDEX_NAME = re.compile(r"^(\d{20})\.(index|timeindex)\.swap$")


def _with_suffix(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _segment_files(directory: Path, base_offset: int) -> tuple[Path, Path, Path]:
    """(segment, offset index, time index) paths of the segment named ``base_offset``."""
    return (
        segment_path(directory, base_offset),
        index_path(directory, base_offset),
        time_index_path(directory, base_offset),
    )


class CleanedSegmentWriter:
    """Writes ``S.log.cleaned`` and its indexes, batch after batch, as ``append`` would.

    Index entries follow the index point rule (segment_index.py), so the indexes
    are byte for byte those a rebuild from the cleaned segment would give.
    """

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.paths = tuple(
            _with_suffix(path, CLEANED_SUFFIX) for path in _segment_files(directory, base_offset)
        )
        self.next_offset = base_offset
        self.size_bytes = 0
        self.batch_count = 0
        self.finished = False  # fsynced, ready to commit (``finish``)
        self._max_timestamp_ms = NO_TIMESTAMP
        # O_TRUNC: a leftover of an attempt that failed in this process is stale.
        self._fd = os.open(self.paths[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self._index = SegmentIndex.create(self.paths[1], self.paths[2])
        except BaseException:
            os.close(self._fd)
            self.paths[0].unlink(missing_ok=True)
            raise

    def append(self, batch: bytes | memoryview, header: BatchHeader) -> None:
        assert header.base_offset == self.next_offset, "a cleaned segment keeps offsets contiguous"
        view = memoryview(batch)
        while view:
            view = view[os.write(self._fd, view) :]
        self._max_timestamp_ms = max(self._max_timestamp_ms, header.max_timestamp_ms)
        if self._index.is_index_point(self.size_bytes, self.index_interval_bytes):
            self._index.append(
                header.base_offset - self.base_offset, self.size_bytes, self._max_timestamp_ms
            )
        self.size_bytes += header.size_bytes
        self.next_offset = header.next_offset
        self.batch_count += 1
        failpoints.hit("compaction.after_cleaned_batch")

    def finish(self, mtime_ns: int) -> None:
        """fsync the three files and the directory (step 1). ``mtime_ns``: the newest
        modification time of the segments it replaces, so retention by age (which
        falls back to it for batches without timestamps) sees the same age."""
        os.fsync(self._fd)
        os.utime(self._fd, ns=(mtime_ns, mtime_ns))
        self._index.flush()
        self.close()
        fsync_directory(self.directory)
        self.finished = True
        failpoints.hit("compaction.after_write_cleaned")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._index.close()

    def discard(self) -> None:
        """Delete the ``.cleaned`` files (nothing was committed)."""
        self.finished = False
        self.close()
        for path in self.paths:
            path.unlink(missing_ok=True)


def commit_swap(directory: Path, base_offset: int) -> None:
    """Step 2: after it, the cleaned segment replaces the group, whatever happens."""
    cleaned = [
        _with_suffix(path, CLEANED_SUFFIX) for path in _segment_files(directory, base_offset)
    ]
    swap = [_with_suffix(path, SWAP_SUFFIX) for path in _segment_files(directory, base_offset)]
    os.replace(cleaned[1], swap[1])
    os.replace(cleaned[2], swap[2])
    os.replace(cleaned[0], swap[0])  # the commit point
    fsync_directory(directory)
    failpoints.hit("compaction.after_commit")


def is_committed(directory: Path, base_offset: int) -> bool:
    """Does ``S.log.swap`` exist (step 2 done, step 5 not)?"""
    return _with_suffix(segment_path(directory, base_offset), SWAP_SUFFIX).exists()


def complete_swap(directory: Path, base_offset: int, end_offset: int) -> list[int]:
    """Steps 3-5 for the committed ``S.log.swap`` spanning ``[base_offset, end_offset)``.

    Idempotent. Returns the base offsets of the replaced segments it deleted.
    """
    deleted = []
    for replaced in list_segment_base_offsets(directory):
        if base_offset < replaced < end_offset:
            for path in reversed(_segment_files(directory, replaced)):  # the .log last
                path.unlink(missing_ok=True)
            deleted.append(replaced)
    # Each step durable before the next: were the renames below durable and these
    # deletions not, a power loss would leave the new segment and the replaced ones,
    # overlapping, with no marker left to say which wins.
    fsync_directory(directory)
    failpoints.hit("compaction.after_delete_replaced")
    segment, offset_index, time_index = _segment_files(directory, base_offset)
    swap_offset_index = _with_suffix(offset_index, SWAP_SUFFIX)
    swap_time_index = _with_suffix(time_index, SWAP_SUFFIX)
    if swap_offset_index.exists() and swap_time_index.exists():
        os.replace(swap_offset_index, offset_index)
        os.replace(swap_time_index, time_index)
    else:  # a lost rename: never pair the old indexes with the new segment
        for path in (swap_offset_index, swap_time_index, offset_index, time_index):
            path.unlink(missing_ok=True)
    fsync_directory(directory)  # never the new segment with the old indexes
    failpoints.hit("compaction.before_rename_segment")
    os.replace(_with_suffix(segment, SWAP_SUFFIX), segment)
    fsync_directory(directory)
    failpoints.hit("compaction.after_swap")
    return deleted


def finish_interrupted_compactions(directory: Path) -> list[str]:
    """The recovery rule above; returns what it did, one line per file (for the report)."""
    done: list[str] = []
    swapped: list[int] = []
    for entry in os.scandir(directory):
        if entry.name.endswith(CLEANED_SUFFIX):
            os.unlink(entry.path)
            done.append(f"deleted {entry.name} (an uncommitted compaction)")
        elif match := _SWAP_SEGMENT_NAME.match(entry.name):
            swapped.append(int(match.group(1)))
    for base_offset in sorted(swapped):
        end_offset = _end_offset_of_swap(directory, base_offset)
        deleted = complete_swap(directory, base_offset, end_offset)
        done.append(
            f"finished the committed compaction of offsets {base_offset}..{end_offset} "
            f"(replaced segments {[base_offset, *deleted]})"
        )
    for entry in os.scandir(directory):
        match = _SWAP_INDEX_NAME.match(entry.name)
        if match and int(match.group(1)) not in swapped:
            os.unlink(entry.path)
            done.append(f"deleted {entry.name} (an uncommitted compaction)")
    if done:
        fsync_directory(directory)
        for line in done:
            logger.warning("%s: %s", directory, line)
    return done


def _end_offset_of_swap(directory: Path, base_offset: int) -> int:
    path = _with_suffix(segment_path(directory, base_offset), SWAP_SUFFIX)
    fd = os.open(path, os.O_RDONLY)
    try:
        file_bytes = os.fstat(fd).st_size
        result = scan_batches(fd, 0, file_bytes, base_offset, lambda position, header: None)
    finally:
        os.close(fd)
    if result.bad_position is not None or result.batches_checked == 0:
        reason = result.bad_reason or "it holds no batch"
        raise CorruptLogError(
            f"{path} is a committed compaction (fsynced before it was committed), but it is "
            f"damaged at position {result.end_position}: {reason}. The segments it replaces "
            "may be partly deleted already; nothing was changed. Restore the partition from a "
            "backup or replica",
            str(path),
            result.bad_position if result.bad_position is not None else 0,
        )
    return result.next_offset
