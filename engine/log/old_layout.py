"""Refusing segments written in the batch layout of older twinlog versions.

Before the batch header became Kafka's RecordBatch v2 (61 bytes), twinlog wrote a
67-byte header with its magic byte at position 12, a 32-bit generation and a
transaction id. Such a segment must never be taken for a torn or damaged tail and
truncated: recovery would destroy data that is whole. So before a log is recovered,
the first batch of each of its segment files is looked at; one in the old layout
stops the open with DataDirFormatError, and nothing in the directory is changed.

Cost: one 13-byte read per segment file; the first batch is read whole only when its
byte 12 is 2 (in the current layout that is the high byte of the leader epoch, which
no log reaches).
"""

from __future__ import annotations

import os
from pathlib import Path

from twinlog.engine.base.errors import DataDirFormatError
from twinlog.engine.log.files import SEGMENT_SUFFIX, list_segment_base_offsets, segment_stem
from twinlog.engine.records.batch_format import (
    BATCH_BYTES_HARD_MAX,
    LENGTH_PREFIX,
    LENGTH_PREFIX_BYTES,
    MAGIC,
    OLD_LAYOUT_MAGIC_OFFSET,
    looks_like_old_layout,
)


def segment_has_old_layout(path: Path) -> bool:
    """Does the segment file at ``path`` start with a batch of the old 67-byte layout?"""
    with open(path, "rb", buffering=0) as file:
        prefix = file.read(LENGTH_PREFIX_BYTES + 1)
        if len(prefix) <= OLD_LAYOUT_MAGIC_OFFSET or prefix[OLD_LAYOUT_MAGIC_OFFSET] != MAGIC:
            return False
        _, batch_length = LENGTH_PREFIX.unpack_from(prefix)
        if not 0 < batch_length <= BATCH_BYTES_HARD_MAX:
            return False
        batch = os.pread(file.fileno(), LENGTH_PREFIX_BYTES + batch_length, 0)
    return looks_like_old_layout(batch)


def refuse_old_layout(directory: Path, segments_max: int | None = None) -> None:
    """Raise DataDirFormatError if a segment of the log in ``directory`` is in the old layout.

    ``segments_max`` checks only the first segments (a reader opened per task: a log is
    written in one layout, so its first segment tells)."""
    for base_offset in list_segment_base_offsets(directory)[:segments_max]:
        path = directory / (segment_stem(base_offset) + SEGMENT_SUFFIX)
        if segment_has_old_layout(path):
            raise DataDirFormatError(
                f"{path} was written by an older twinlog (batch format with a transaction id "
                "in the header, 67 bytes); this version reads Kafka's RecordBatch v2 (61 bytes) "
                "only. Nothing was changed. Start with an empty data directory, or run the "
                "twinlog version that wrote it to consume what it holds"
            )
