"""Reading a data log directory without a DataLog (a Spark job scanning a data directory).

``LogReader`` runs no recovery and writes nothing. It lists the segment files,
then yields whole batches whose CRC checks out, in offset order. At the end of
the last segment it stops quietly at the first incomplete or bad batch that no
valid batch follows: that is a batch the writer is still writing (or a torn
tail the next open will cut). A bad batch anywhere else (an earlier segment,
or one followed by a valid batch) raises CorruptLogError: it is never skipped.

It reads what is in the files, which can include batches the writer has not
fsynced yet or is about to remove (an append_many that fails and rolls back, a
copier cutting a torn copy). Pass ``to_offset`` (e.g. a log end offset the
broker reported) to read only what is known to be committed and durable.

Thread rule: no shared state; use one reader from any thread, or several.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

from twinlog.engine.base.errors import CorruptBatchError, CorruptLogError, OffsetOutOfRangeError
from twinlog.engine.log.checkpoints import read_log_start_offset
from twinlog.engine.log.files import index_path, list_segment_base_offsets, segment_path
from twinlog.engine.log.headers import parse_header
from twinlog.engine.log.scan import ScanResult, find_valid_batch_after, iter_valid_batches
from twinlog.engine.log.segment_index import OFFSET_ENTRY, OFFSET_ENTRY_BYTES
from twinlog.engine.records.batch_format import BatchHeader


class LogReader:
    """Read-only access to the batches of one data log directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

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

        Stops before the first batch whose base offset is >= ``to_offset``.
        Raises OffsetOutOfRangeError if ``from_offset`` is below the log start.
        """
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
