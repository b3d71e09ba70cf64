"""Keeping freed memory in the process: glibc's malloc told not to hand it back at once.

A transactional batch crosses the broker as several short-lived buffers of about a
batch each (the request, the journal read, the copy). With glibc's defaults every
thread's arena gives freed memory back to the kernel (``madvise``) as soon as 128 KiB
sit free at its top, and the next buffer faults the same pages in again, zero-filled:
``perf stat`` on the server counted ≈ 780 page faults per transaction of 1,000 x 1 KiB
(≈ 3 MiB faulted per MiB written), against ≈ 40 for the plain path.

``keep_freed_memory()`` sets two malloc parameters (``mallopt``), as the
``MALLOC_TRIM_THRESHOLD_`` and ``MALLOC_MMAP_THRESHOLD_`` environment variables would:

    M_MMAP_THRESHOLD   32 MiB   larger blocks get their own mapping. glibc's largest
                                (half a 64 MiB arena heap on 64-bit), above the
                                server's fetch_bytes_max (16 MiB) and batch_bytes_max
                                (8 MiB): every fetch answer and batch reuses arena
                                memory. Below this, each one was mapped on its own and
                                unmapped when freed: a fetch of 8 MiB (the Spark
                                reader's) faulted in and zero-filled 2,048 fresh pages.
    M_TRIM_THRESHOLD   64 MiB   free memory an arena keeps at its top before trimming.
                                Above what one request frees at once (a fetch's read,
                                its answer and gRPC's copy of it, up to 16 MiB each):
                                past the threshold malloc gives back *all* of the top,
                                and the next request faults it in again.

Measured on the Spark read of 1,000,000 x 1 KiB rows (8 MiB fetches) against
``twinlog serve``, two runs each: with a 4 MiB / 16 MiB pair the server spent
1.72-1.77 s of CPU, a third of it page faults and zero-filling; with this pair
0.42-0.43 s, and the read took 2.4-2.6 s instead of 3.1 s.

Each arena then keeps at most 64 MiB it is not using (glibc makes at most 8 arenas per
core), and memory is still returned beyond that. It is a process-wide setting, so the
engine never makes it on its own: ``twinlog serve`` calls it at start-up, and an
application embedding a ``Broker`` may call it. Where malloc is not glibc's (another
libc, macOS, Windows) it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD_BYTES = 64 << 20
MMAP_THRESHOLD_BYTES = 32 << 20


def keep_freed_memory(
    trim_threshold_bytes: int = TRIM_THRESHOLD_BYTES,
    mmap_threshold_bytes: int = MMAP_THRESHOLD_BYTES,
) -> str:
    """Apply both settings if malloc is glibc's; return what was done, for the log."""
    if not sys.platform.startswith("linux"):
        return "malloc: left as is (not Linux)"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "malloc: left as is (not glibc)"
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on error
    trimmed = mallopt(M_TRIM_THRESHOLD, trim_threshold_bytes) == 1
    mapped = mallopt(M_MMAP_THRESHOLD, mmap_threshold_bytes) == 1
    if not (trimmed and mapped):
        return "malloc: glibc refused the thresholds, left as is"
    return (
        f"malloc: keeps {trim_threshold_bytes >> 20} MiB free per arena, "
        f"maps blocks over {mmap_threshold_bytes >> 20} MiB"
    )
