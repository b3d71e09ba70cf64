"""Opening a file when the process may be out of descriptors: a typed refusal, not EMFILE.

Logs open their files on first use (segment.py), so a broker that holds many partitions
meets its open-files limit at a write or a read, not at start-up; the caller then gets
NotEnoughResourcesError (retriable) saying which limit and what to do.
"""

from __future__ import annotations

import errno
import logging
import os

from twinlog.engine.base.errors import NotEnoughResourcesError

log = logging.getLogger(__name__)

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


# Which file a path named when its owner took it: (st_dev, st_ino).
FileIdentity = tuple[int, int]


def identity_of(path: str | os.PathLike[str]) -> FileIdentity:
    status = os.stat(path)
    return status.st_dev, status.st_ino


def check_same_file(path: str | os.PathLike[str], identity: FileIdentity) -> None:
    """Raise unless ``path`` still names the file ``identity`` was taken of."""
    try:
        now = identity_of(path)
    except FileNotFoundError:
        now = None
    if now != identity:
        raise _replaced(path)


def open_same_file(path: str | os.PathLike[str], flags: int, identity: FileIdentity) -> int:
    """``open_descriptor`` of ``path``, provided it still names the file ``identity`` was
    taken of. A file opened on first use is opened by name, long after its owner looked at
    it: by then its partition's directory may have been dropped and made again (a
    reassignment moving the copy away and back), and a stale owner writing through the
    name would cut or overwrite the new replica's bytes. An eager descriptor held the old
    file, removed or not; this refusal keeps that promise."""
    descriptor = open_descriptor(path, flags)
    status = os.fstat(descriptor)
    if (status.st_dev, status.st_ino) != identity:
        os.close(descriptor)
        raise _replaced(path)
    return descriptor


def _replaced(path: str | os.PathLike[str]) -> OSError:
    # An owner that outlived its file is a bug to learn about: where it came from.
    log.error("%s: opened by a stale owner (refused)", os.fspath(path), stack_info=True)
    return OSError(
        errno.ESTALE,
        f"{os.fspath(path)} is no longer the file this log opened (removed, or removed and "
        "made again: its partition moved away, or its segment was cut and written anew); "
        "nothing was read or written through it",
        os.fspath(path),
    )
