"""Replace a small file atomically and durably: write aside, fsync, rename, fsync the directory.

After a crash the file holds either the old or the new contents, never a mix.
Used for the broker's metadata, checkpoints and id blocks.
"""

from __future__ import annotations

import os
from pathlib import Path


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
