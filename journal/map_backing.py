"""Keep LMDB's data file at least as long as its memory map.

Without ``writemap``, LMDB maps ``map_size`` bytes of ``data.mdb`` but the file is
only as long as the pages in use. A damaged page (LMDB keeps no checksums) can
send a B-tree search to an address past the file's end but inside the map, and
reading there kills the process with SIGBUS: no error, no chance to say what is
damaged. Seen with a flipped bit in a page header's ``mp_lower`` while another
thread's write had not yet grown the file. Past the end of a file as long as the
map, the same read finds zeros, which LMDB refuses as a corrupt page, and the
journal reports ``CorruptJournalError``.

The extension is sparse (``ftruncate``): it allocates no disk blocks, so it costs
nothing and changes nothing about a full disk (LMDB's own writes still allocate,
and fail with ENOSPC, as before). LMDB itself does the same with ``writemap``.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def back_map_with_file(data_file: str, map_bytes: int) -> bool:
    """Extend ``data_file`` (sparse) to ``map_bytes`` if shorter; True if it was extended.

    Best effort: a file system that refuses (one without sparse files, say, when full)
    leaves the file as LMDB made it, which is how it always worked, and says so.
    """
    try:
        descriptor = os.open(data_file, os.O_RDWR)
    except OSError as error:
        log.warning("cannot extend %s to the journal's map: %s", data_file, error)
        return False
    try:
        if os.fstat(descriptor).st_size >= map_bytes:
            return False
        os.ftruncate(descriptor, map_bytes)
        return True
    except OSError as error:
        log.warning("cannot extend %s to the journal's map: %s", data_file, error)
        return False
    finally:
        os.close(descriptor)
