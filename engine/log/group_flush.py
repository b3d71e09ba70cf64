"""Group commit for one log: writers that append without an fsync share the next one.

A writer appends (``DataLog.append_as_leader(..., defer_flush=True)``) under its own
lock, lets that lock go, then calls ``wait_durable(end_offset)``. The first waiter
fsyncs everything written so far (``DataLog.flush_beside_appends``: appends go on
meanwhile); those queued behind it find their batches covered and return without an
fsync of their own. So N writers appending while an fsync runs pay one more fsync,
not N, and no writer holds its lock across the disk.

Used by the transaction coordinator's journal (``__txn_journal-N``): every producer
of a coordinator appends its decision under the coordinator's lock and waits here
without it.

Invariant (``_lock`` held): every batch below ``_durable_end`` was fsynced, provided
the log was not cut since ``_truncations_seen`` (a cut may replace those offsets with
unflushed bytes, so a cut resets it to 0).
"""

from __future__ import annotations

import threading

from twinlog.engine.log.data_log import DataLog

FLUSHES_BESIDE_CUTS_MAX = 3  # fsyncs raced by a cut of the tail before one holding the lock


class GroupFlush:
    """Thread rule: ``wait_durable`` from any thread; one fsync at a time per log."""

    def __init__(self, log: DataLog) -> None:
        self._log = log
        self._lock = threading.Lock()  # held across the fsync: the next group gathers behind it
        self._durable_end = 0
        self._truncations_seen = log.truncations
        self.fsyncs = 0  # fsyncs made here (a waiter covered by another's made none)

    def wait_durable(self, end_offset: int) -> None:
        """Return once every batch below ``end_offset`` is fsynced. Raises DiskFullError
        (or the OSError) when the fsync fails: nothing is durable then, retry or give up."""
        if self._durable_end >= end_offset and self._log.truncations == self._truncations_seen:
            return  # covered already: no need to queue behind an fsync in progress
        with self._lock:
            for _ in range(FLUSHES_BESIDE_CUTS_MAX):
                truncations = self._log.truncations
                if truncations != self._truncations_seen:
                    self._durable_end, self._truncations_seen = 0, truncations
                if self._durable_end >= end_offset:
                    return
                durable_end = self._log.flush_beside_appends()
                self.fsyncs += 1
                if self._log.truncations == truncations:
                    self._durable_end = max(self._durable_end, durable_end)
            if self._durable_end < end_offset:
                # Cut again during every fsync: one that holds appends and cuts back.
                self._log.flush()
                self.fsyncs += 1
