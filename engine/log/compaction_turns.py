"""Whose turn it is to compact a data log: one compaction at a time, none after a broken swap.

``DataLog.compaction_turn`` hands out turns; ``DataLog.replace_segments`` asks whether
its caller holds one. Invariants (asserted by the data log):

* at most one turn is granted at a time (a lock, taken without waiting: a second
  compaction is told one is running, it does not queue behind it);
* a turn is numbered, and numbers only grow, so a view of the segments taken in
  one turn is told apart from one taken in an earlier turn;
* once ``stop`` was called (a swap failed after its commit), no turn is granted
  again: only the recovery of the next open may touch those files.

Thread rule: any thread; a granted turn belongs to the thread that took it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

RUNNING = "a compaction of this log is running"


class CompactionTurns:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: int | None = None  # thread ident of the granted turn's holder
        self._number = 0  # of the last granted turn; 0: none yet
        self._stopped = ""  # why compaction must wait for the log to be reopened

    @contextmanager
    def take(self) -> Iterator[str]:
        """Hold a turn for the ``with`` block: yields "" if granted, else why not."""
        if not self._lock.acquire(blocking=False):
            yield RUNNING
            return
        try:
            if self._stopped:
                yield self._stopped
                return
            assert self._holder is None, "a turn is granted while another is held"
            self._number += 1
            self._holder = threading.get_ident()
            try:
                yield ""
            finally:
                self._holder = None
        finally:
            self._lock.release()

    def held(self) -> int:
        """The number of the turn the calling thread holds, 0 if it holds none."""
        return self._number if self._holder == threading.get_ident() else 0

    def stop(self, reason: str) -> None:
        """Grant no turn again (in this process): ``reason`` says why, to every caller."""
        assert reason, "a stop needs a reason, which callers are told"
        self._stopped = reason

    @property
    def stopped(self) -> str:
        return self._stopped
