"""Replace a small file atomically and durably: write aside, fsync, rename, fsync the directory.

After a crash the file holds either the old or the new contents, never a mix.
Used for the broker's metadata, checkpoints and id blocks.
"""

from __future__ import annotations

import os
from pathlib import Path

from twinlog.engine.base.crc32c import crc32c

CHECKSUM_LABEL = b"crc32c "


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename or create in ``directory`` durable."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def replace_file(path: str | os.PathLike[str], contents: bytes) -> None:
    """Write ``contents`` to ``path`` so that a crash leaves the old or the new file whole."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(contents)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)
    fsync_directory(target.parent)


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
