"""The partition writers holding MARK_APPLIED records they have not written yet.

A copy is answered once its batches are durable in the data log (and held by the
in-sync replicas); its MARK_APPLIED records wait for the partition's next journal-log
write, the next copy group's MARK_APPLYING, and go in it (``PartitionWriter``). On a busy
partition that saves one replicated journal-log write per copy group, and the
coordinator journals COMMITTED, and the producer's next transaction may begin, one such
write sooner. A crash or a failover before the records are written loses nothing: the
writer that follows finds the transaction APPLYING with its copy whole in the data log
and records APPLIED (``recovery_table``: the same case as a crash between the copy's
fsync and its MARK_APPLIED).

A partition that gets no next copy must not keep them for long (its journal keeps the
transactions' entries and rows until then): the broker writes those left longer than
``MARKS_LEFT_DELAY_MS`` (a background round every that long, ``write_due``) and before
it purges the journal; those left at a close are recorded by the next leader's recovery
(this replica's after a restart), as after a crash.

Invariant: a writer is here from when it leaves records unwritten until it has written
them or given them up (``written``); ``left`` again after that starts a new delay.

Thread rule: every method takes the one lock; any thread. Writers write outside it.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

# How long a partition's MARK_APPLIED records may wait for its next copy group before a
# background round writes them alone: longer than the gap between two commits on a busy
# partition (a few milliseconds), short enough that an idle partition's journal is
# cleaned up promptly.
MARKS_LEFT_DELAY_MS = 50


class LeavesMarks(Protocol):
    def write_marks_left(self) -> None:
        """Write the MARK_APPLIED records left unwritten now, unless a copy is under way
        (it writes them). Raises nothing: a failure makes the next write recover first."""


class MarksLeft:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # writer -> when it first left records unwritten (time.monotonic()), oldest first
        self._left_at_s: dict[LeavesMarks, float] = {}

    def left(self, writer: LeavesMarks) -> None:
        """``writer`` holds MARK_APPLIED records it has not written (again)."""
        with self._lock:
            self._left_at_s.setdefault(writer, time.monotonic())

    def written(self, writer: LeavesMarks) -> None:
        """``writer`` holds none any more."""
        with self._lock:
            self._left_at_s.pop(writer, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._left_at_s)

    def write_due(self, delay_ms: int = MARKS_LEFT_DELAY_MS) -> int:
        """Have every writer that left records at least ``delay_ms`` ago write them; how
        many were asked (0 ms: all of them)."""
        due_before_s = time.monotonic() - delay_ms / 1000
        with self._lock:
            due = [writer for writer, at_s in self._left_at_s.items() if at_s <= due_before_s]
        for writer in due:
            writer.write_marks_left()
        return len(due)

    def write_all(self) -> int:
        """Have every writer write its records now (before a journal purge)."""
        return self.write_due(0)
