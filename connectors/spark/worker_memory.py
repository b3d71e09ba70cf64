"""Spark's Python worker keeps freed memory, as ``twinlog serve`` does.

A write task builds a batch of about a megabyte at a time (the records joined, then
compressed, then joined to their header) and a read task decodes 4 MiB Arrow batches
from 8 MiB fetches: every one a buffer larger than glibc's default mapping threshold,
so each was mapped on its own, faulted in page by page, zero-filled, and unmapped when
freed. ``engine.base.allocator.keep_freed_memory`` keeps them in the arenas (its
docstring has the settings and the figures); a task applies it once per worker
process, the first time it runs there. Spark's Python workers run only Python tasks,
and are reused for the next one (``spark.python.worker.reuse``).
"""

from __future__ import annotations

import logging
import threading

from twinlog.engine.base.allocator import keep_freed_memory

log = logging.getLogger("twinlog.spark")

_applied = threading.Event()


def keep_freed_memory_in_this_worker() -> None:
    """``keep_freed_memory()``, once per process."""
    if _applied.is_set():
        return
    _applied.set()
    log.debug("twinlog Spark task: %s", keep_freed_memory())
