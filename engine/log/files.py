"""File names of a data log directory, and the few file-system calls that need care.

One directory per partition holds:

    00000000000000000000.log         a segment: concatenated record batches; the name
                                     is the base offset (offset of its first batch),
                                     20 digits, zero-padded, so names sort like offsets
    00000000000000000000.index       its sparse offset index (see segment_index.py)
    00000000000000000000.timeindex   its sparse time index (see segment_index.py)
    recovery-point                   checkpoint: how far the log is known flushed
    log-start-offset                 checkpoint: the first offset still stored
    00000000000000000000.log.4096.corrupt
                                     bytes recovery cut from a torn tail at position 4096
    *.tmp                            a checkpoint being replaced (deleted on open)

A file is made durable with fsync; its *name* (create, rename, unlink) is made
durable only by an fsync of the directory, which is why ``fsync_directory``
follows every such change.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from twinlog.engine.base.descriptors import open_descriptor

SEGMENT_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CORRUPT_SUFFIX = ".corrupt"
TEMPORARY_SUFFIX = ".tmp"
BASE_OFFSET_DIGITS = 20  # enough for any int64 offset

_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


def segment_stem(base_offset: int) -> str:
    return f"{base_offset:0{BASE_OFFSET_DIGITS}d}"


def segment_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_stem(base_offset) + SEGMENT_SUFFIX)


def index_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_stem(base_offset) + INDEX_SUFFIX)


def time_index_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_stem(base_offset) + TIME_INDEX_SUFFIX)


def corrupt_copy_path(segment: Path, position: int) -> Path:
    return segment.with_name(f"{segment.name}.{position}{CORRUPT_SUFFIX}")


def list_segment_base_offsets(directory: Path) -> list[int]:
    """Base offsets of the segment files in ``directory``, ascending."""
    base_offsets = []
    for entry in os.scandir(directory):
        match = _SEGMENT_NAME.match(entry.name)
        if match and entry.is_file():
            base_offsets.append(int(match.group(1)))
    return sorted(base_offsets)


def fsync_file(path: Path) -> None:
    """fsync ``path`` through a descriptor held only for the call (fsync flushes the
    file, whatever descriptor it is given)."""
    fd = open_descriptor(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """Make creations, renames and deletions in ``directory`` durable."""
    fd = open_descriptor(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a mix.

    Write a temporary file, fsync it, rename it over ``path``, fsync the
    directory. The fsync before the rename matters: without it a crash can
    leave the new name pointing at an empty file.
    """
    temporary = path.with_name(path.name + TEMPORARY_SUFFIX)
    fd = open_descriptor(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fsync_directory(path.parent)
