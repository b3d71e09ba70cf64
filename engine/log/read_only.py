"""Reading a data log directory without a DataLog (a Spark job scanning a data directory).

``LogReader`` runs no recovery and writes nothing. It lists the segment files,
then yields whole batches whose CRC checks out, in offset order. At the end of
the last segment it stops quietly at the first incomplete or bad batch that no
valid batch follows: that is a batch the writer is still writing (or a torn
tail the next open will cut). A bad batch anywhere else (an earlier segment,
or one followed by a valid batch) raises CorruptLogError: it is never skipped.

It never ends inside an ``append_all_as_leader`` (the copier applying a committed
transaction, batch by batch): the writer marks one of two or more batches in
progress (the ``append-state`` checkpoint) and the reader stops at its first offset, as the
broker's own readers only see it once it is published whole. ``end_offset``
reads the mark before and after scanning, and scans again if an append started
or finished meanwhile. A copy torn by a kill stays hidden until the broker's next
open has cut or finished it and written again.

Nor past the high watermark a live broker published (``high_watermark``): batches
not yet committed are not read.

It reads what is in the files, which can include batches the writer has not
fsynced yet (a power loss may still take them). Pass ``to_offset`` (e.g. a log
end offset the broker reported) to read only what is known to be durable.

Thread rule: no shared state; use one reader from any thread, or several.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

from twinlog.engine.base.errors import CorruptBatchError, CorruptLogError, OffsetOutOfRangeError
from twinlog.engine.log.checkpoints import AppendState, read_append_state, read_log_start_offset
from twinlog.engine.log.files import index_path, list_segment_base_offsets, segment_path
from twinlog.engine.log.headers import parse_header
from twinlog.engine.log.high_watermark import read_high_watermark
from twinlog.engine.log.old_layout import refuse_old_layout
from twinlog.engine.log.scan import ScanResult, find_valid_batch_after, iter_valid_batches
from twinlog.engine.log.segment_index import OFFSET_ENTRY, OFFSET_ENTRY_BYTES
from twinlog.engine.records.batch_format import BatchHeader

END_SCAN_ATTEMPTS_MAX = 1000  # appends starting or finishing during each scan of the end
END_SCAN_RETRY_S = 0.001


class LogReader:
    """Read-only access to the batches of one data log directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        """DataDirFormatError for a log an older twinlog wrote: its 67-byte headers would
        not parse, and the log would read as empty instead of failing."""
        self.directory = Path(directory)
        refuse_old_layout(self.directory, segments_max=1)

    def end_offset(self) -> int:
        """The offset after the last whole batch that is not part of an append in progress.

        Raises OffsetOutOfRangeError (retriable by reading again) if appends keep
        starting and finishing through every one of many scans.
        """
        for _ in range(END_SCAN_ATTEMPTS_MAX):
            before = read_append_state(self.directory)
            end = self._scanned_end()
            after = read_append_state(self.directory)
            if _in_progress(after):
                assert after is not None
                # Everything before it was whole when it started, whatever the scan saw.
                return self._below_high_watermark(after.first_offset)
            if before == after:
                return self._below_high_watermark(end)
            time.sleep(END_SCAN_RETRY_S)
        raise OffsetOutOfRangeError(
            f"{self.directory}: the writer appended through {END_SCAN_ATTEMPTS_MAX} scans of "
            "the log end; read again",
            -1,
            -1,
        )

    def _below_high_watermark(self, offset: int) -> int:
        """``offset``, or the HW a live broker published if lower (uncommitted: not read)."""
        high_watermark = read_high_watermark(self.directory)
        return offset if high_watermark is None else min(offset, high_watermark)

    def _scanned_end(self) -> int:
        if not self.directory.is_dir():
            return 0
        start = self.log_start_offset()
        base_offsets = self.segment_base_offsets()
        end = max(start, base_offsets[-1]) if base_offsets else start
        # The end is past the last whole batch of the last segment: scan that segment.
        for header, _ in self._iter_batches(end, None):
            end = header.next_offset
        return end

    def segment_base_offsets(self) -> list[int]:
        return list_segment_base_offsets(self.directory)

    def log_start_offset(self) -> int:
        """The first offset still stored (the checkpoint, else the first segment's base)."""
        base_offsets = self.segment_base_offsets()
        first = base_offsets[0] if base_offsets else 0
        return max(first, read_log_start_offset(self.directory) or 0)

    def iter_batches(
        self, from_offset: int | None = None, to_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """(header, batch bytes) of each whole valid batch, from the one holding ``from_offset``.

        Stops before the first batch whose base offset is >= ``to_offset``, and
        before an append in progress. Raises OffsetOutOfRangeError if
        ``from_offset`` is below the log start.
        """
        mark = read_append_state(self.directory)
        if _in_progress(mark):
            assert mark is not None
            to_offset = (
                mark.first_offset if to_offset is None else min(to_offset, mark.first_offset)
            )
        high_watermark = read_high_watermark(self.directory)
        if high_watermark is not None:
            to_offset = high_watermark if to_offset is None else min(to_offset, high_watermark)
        return self._iter_batches(from_offset, to_offset)

    def _iter_batches(
        self, from_offset: int | None, to_offset: int | None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        base_offsets = self.segment_base_offsets()
        start_offset = self.log_start_offset()
        if from_offset is None:
            from_offset = start_offset
        if from_offset < start_offset:
            raise OffsetOutOfRangeError(
                f"offset {from_offset} is below the log start offset {start_offset}",
                start_offset,
                -1,
            )
        first = max(bisect_right(base_offsets, from_offset) - 1, 0)
        end_offset = [-1]  # of the segment read last
        for number in range(first, len(base_offsets)):
            is_last = number == len(base_offsets) - 1
            if number > first and base_offsets[number] != end_offset[0]:
                # Listed before a compaction or retention changed the directory: the
                # segment between was replaced or deleted since. Never skip offsets.
                raise OffsetOutOfRangeError(
                    f"{self.directory}: the segment ending at offset {end_offset[0]} is "
                    f"followed by one starting at {base_offsets[number]}: the log was "
                    "compacted or retention deleted segments while it was read; read again",
                    -1,
                    -1,
                )
            for header, batch in self._segment_batches(
                base_offsets[number], from_offset, is_last, end_offset
            ):
                if to_offset is not None and header.base_offset >= to_offset:
                    return
                yield header, batch

    def _segment_batches(
        self, base_offset: int, from_offset: int, is_last: bool, end_offset: list[int]
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """The segment's batches from ``from_offset``; sets ``end_offset[0]`` to its end."""
        path = segment_path(self.directory, base_offset)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise OffsetOutOfRangeError(
                f"{path} was deleted (retention or compaction) while it was being read; start "
                "again from the new log start offset",
                -1,
                -1,
            ) from None
        try:
            file_bytes = os.fstat(fd).st_size
            start_position, expected_offset = self._index_hint(
                fd, base_offset, from_offset, file_bytes
            )
            result = ScanResult(start_position, expected_offset)
            for _, header, batch in iter_valid_batches(fd, start_position, file_bytes, result):
                if header.next_offset > from_offset:
                    yield header, batch
            end_offset[0] = result.next_offset
            if result.bad_position is None:
                return
            valid_after = (
                find_valid_batch_after(fd, result.bad_position, file_bytes, result.next_offset)
                if is_last
                else None
            )
            if not is_last or valid_after is not None:
                where = (
                    "is not the last segment"
                    if not is_last
                    else f"a valid batch follows at position {valid_after}"
                )
                raise CorruptLogError(
                    f"{path} holds a bad batch at position {result.bad_position} "
                    f"({result.bad_reason}) and {where}: the segment is damaged. Restore it "
                    "from a backup or replica",
                    str(path),
                    result.bad_position,
                )
        finally:
            os.close(fd)

    def _index_hint(
        self, fd: int, base_offset: int, from_offset: int, file_bytes: int
    ) -> tuple[int, int]:
        """(position, base offset) of an indexed batch at or before ``from_offset``, or the start.

        The index may be stale or torn (nothing here repairs it), so the entry is
        used only if the batch it points at has the offset it claims.
        """
        try:
            entries = index_path(self.directory, base_offset).read_bytes()
        except FileNotFoundError:
            return 0, base_offset
        usable = len(entries) - len(entries) % OFFSET_ENTRY_BYTES
        hint = (0, base_offset)
        for relative_offset, position in OFFSET_ENTRY.iter_unpack(entries[:usable]):
            offset = base_offset + relative_offset
            if offset > from_offset or position >= file_bytes:
                break
            hint = (position, offset)
        position, offset = hint
        if position:
            header_bytes = os.pread(fd, 128, position)
            try:
                if parse_header(header_bytes, 0, position).base_offset != offset:
                    return 0, base_offset
            except CorruptBatchError:
                return 0, base_offset
        return hint


def _in_progress(mark: AppendState | None) -> bool:
    return mark is not None and mark.in_progress == 1
