"""Rewrite a small mark file in place: one ``pwrite`` at offset 0, no rename.

``replace_file`` (write aside, rename) costs about 170 µs here, most of it the kernel's
rename (ext4 writes the new file's blocks out when it replaces another); a log's marks
for readers of its files (``checkpoints``' ``append-state``) change twice per copied
transaction, and that cost was a fifth of the copy threads' time. A mark of a fixed
length is rewritten in place instead, in about 1 µs:

* a killed process leaves the old contents or the new, whole: a ``pwrite`` of a few
  dozen bytes into one page completes before a signal is taken;
* a reader in another process (or thread) may see a mix of both while it reads (a read does not
  wait for a write to the same page): every such file carries a CRC, and its reader reads
  again while it does not parse or its CRC does not match (``read_consistent``);
* a mark whose length changes, or a missing file, is written with ``replace_file`` once
  (``durable=False``, as these marks need not outlive the machine), then in place.

Like ``replace_file``, a full disk raises DiskFullError and the old contents stay.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from twinlog.engine.base.atomic_file import DISK_FULL_ERRNOS, replace_file
from twinlog.engine.base.descriptors import open_descriptor
from twinlog.engine.base.errors import DiskFullError

T = TypeVar("T")

READ_ATTEMPTS_MAX = 20  # a writer rewrites a mark in about a microsecond
READ_RETRY_S = 0.0002


def write_in_place(path: Path, contents: bytes) -> None:
    """Make ``path`` hold ``contents``: in place when it already holds as many bytes, else
    replaced (not durably). DiskFullError on a full disk (the old contents stay)."""
    try:
        descriptor = open_descriptor(path, os.O_WRONLY)
    except FileNotFoundError:
        replace_file(path, contents, durable=False)
        return
    try:
        if os.fstat(descriptor).st_size != len(contents):
            replace_file(path, contents, durable=False)
            return
        try:
            written = os.pwrite(descriptor, contents, 0)
        except OSError as error:
            if error.errno in DISK_FULL_ERRNOS:
                raise DiskFullError(
                    f"disk full while rewriting {path} ({len(contents)} bytes) in place: the "
                    "old contents stay. Free space on that volume, then retry"
                ) from error
            raise
        # One page, one call: a short count would mean a device that tears small writes.
        assert written == len(contents), (path, written, len(contents))
    finally:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def read_consistent(read: Callable[[], T], consistent: Callable[[T], bool]) -> T:
    """``read()`` again while what it gives is not ``consistent`` (a mix of two versions
    read while the writer rewrote the file, whose CRC does not match), a bounded number
    of times; then the last answer, whatever it is (a file damaged for good)."""
    answer = read()
    for _ in range(READ_ATTEMPTS_MAX - 1):
        if consistent(answer):
            break
        time.sleep(READ_RETRY_S)
        answer = read()
    return answer
