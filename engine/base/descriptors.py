"""Opening a file when the process may be out of descriptors: a typed refusal, not EMFILE.

Logs open their files on first use (segment.py), so a broker that holds many partitions
meets its open-files limit at a write or a read, not at start-up; the caller then gets
NotEnoughResourcesError (retriable) saying which limit and what to do.
"""

from __future__ import annotations

import errno
import os

from twinlog.engine.base.errors import NotEnoughResourcesError

# OSError numbers that mean "no descriptor left": the process's or the system's limit.
NO_DESCRIPTOR_ERRNOS = (errno.EMFILE, errno.ENFILE)


def open_descriptor(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open``, with the open-files limit reported as what it is and what to do."""
    try:
        return os.open(path, flags, mode)
    except OSError as error:
        if error.errno in NO_DESCRIPTOR_ERRNOS:
            raise NotEnoughResourcesError(
                f"cannot open {os.fspath(path)}: this process holds as many open files as it "
                "may (ulimit -n); raise the limit, or write to fewer partitions at once"
            ) from error
        raise
