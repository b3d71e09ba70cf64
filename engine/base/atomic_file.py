"""Replace a small file atomically and durably: write aside, fsync, rename, fsync the directory.

After a crash the file holds either the old or the new contents, never a mix.
Used for the broker's metadata, checkpoints, id blocks and producer-state snapshots.

On a full disk (ENOSPC, EDQUOT) ``replace_file`` raises DiskFullError, retriable,
with the OSError as its cause; the old file stays whole and the temporary one is
removed. The clean-up is best effort: an error in it is never what the caller sees.
Failpoints ``file.before_write`` and ``file.before_fsync`` fake either failure.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from twinlog.engine.base import failpoints
from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.descriptors import open_descriptor
from twinlog.engine.base.errors import DiskFullError

CHECKSUM_LABEL = b"crc32c "
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename or create in ``directory`` durable."""
    descriptor = open_descriptor(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def replace_file(
    path: str | os.PathLike[str], contents: bytes, durable: bool = True, mode: int = 0o644
) -> None:
    """Write ``contents`` to ``path`` so that a crash leaves the old or the new file whole.

    ``durable=False`` skips both fsyncs: readers still see the old file or the new
    one, never a mix, and a killed process leaves the new one; only a power loss
    may bring back the old one (for marks that live as long as the page cache).
    ``mode``: the new file's, from its creation (0o600 for a secret's file: it is never
    readable by others, not even for a moment).
    """
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        _write_synced(temporary, contents, durable, mode)
    except OSError as error:
        # Unbuffered writes and a close of our own: a buffered file's close would write
        # again and raise a second ENOSPC over the first.
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if error.errno in DISK_FULL_ERRNOS:
            raise DiskFullError(
                f"disk full while replacing {target} ({len(contents)} bytes): nothing was "
                "changed, the old file stays. Free space on that volume, then retry"
            ) from error
        raise
    os.replace(temporary, target)
    if durable:
        fsync_directory(target.parent)


def _write_synced(path: Path, contents: bytes, durable: bool, mode: int = 0o644) -> None:
    if mode != 0o644:  # a leftover temporary would keep its wider mode through O_CREAT
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    descriptor = open_descriptor(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        failpoints.hit("file.before_write")
        view = memoryview(contents)
        while view:
            view = view[os.write(descriptor, view) :]
        if durable:
            failpoints.hit("file.before_fsync")
            os.fsync(descriptor)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(descriptor)
        raise
    os.close(descriptor)


def with_checksum(contents: bytes) -> bytes:
    """``contents`` with a last line holding their CRC-32C: ``LF "crc32c " 8hex LF``."""
    return contents + b"\n" + CHECKSUM_LABEL + b"%08x\n" % crc32c(contents)


def read_checked(path: str | os.PathLike[str]) -> bytes:
    """The contents of a file written with ``with_checksum``; ValueError if they do not match.

    A file without the checksum line (written before it existed) is returned
    whole: no single flipped bit turns a checked file into one that parses so.
    """
    raw = Path(path).read_bytes()
    body, _, last_line = raw[:-1].rpartition(b"\n")
    if not raw.endswith(b"\n") or not last_line.startswith(CHECKSUM_LABEL):
        return raw
    stored = last_line[len(CHECKSUM_LABEL) :]
    actual = b"%08x" % crc32c(body)
    if stored != actual:
        raise ValueError(
            f"checksum mismatch: the file says {stored.decode('ascii', 'replace')}, "
            f"its contents give {actual.decode()}"
        )
    return body


SPACE_PROBE_NAME = "space-probe"
SPACE_PROBE_BYTES = 4096  # one block: a write that fits in a file's last block proves nothing


def probe_space(directory: str | os.PathLike[str]) -> None:
    """Write and delete one block in ``directory``; DiskFullError if the volume is full."""
    probe = Path(directory) / SPACE_PROBE_NAME
    try:
        replace_file(probe, bytes(SPACE_PROBE_BYTES))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)
