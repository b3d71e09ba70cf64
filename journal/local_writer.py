"""Group commit: one thread owns every LMDB write transaction of the journal.

Callers (any thread) ``submit`` an operation and block. The writer thread takes
the first waiting request, gathers whatever else is queued (up to
``group_entries_max`` requests and ``group_bytes_max`` bytes), runs them all in
ONE write transaction, commits it with ONE sync, and only then wakes every
caller of the group. While it syncs, the next group piles up in the queue: the
busier the journal, the larger the groups, the fewer syncs per entry.

Why one thread: py-lmdb (like LMDB) ties a write transaction to the thread that
began it, and LMDB allows one write transaction at a time anyway; a single
owner also makes the map resize safe, since only it could hold a write
transaction when it resizes.

Failures:
  - an operation's ``check`` refuses    -> that caller alone gets the error
  - ``lmdb.MapFullError``              -> abort, grow the map (doubling, up to
                                          ``map_size_bytes_max``), retry the group
  - the map cannot grow further        -> DiskFullError to the appends of the group;
                                          the rest (deletes) may use a headroom
                                          beyond the limit, so a full journal can
                                          still be emptied
  - anything else (an apply, the commit, the sync, a failpoint)
                                        -> abort; the whole group gets the error
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import threading
import time
from typing import Any

import lmdb

from twinlog.engine.base import failpoints, fsync_latency
from twinlog.engine.base.errors import (
    CorruptJournalError,
    DiskFullError,
    LogClosedError,
    TwinlogError,
)
from twinlog.journal.group_durability import GroupDurability
from twinlog.journal.local_config import SYNC_ENV, JournalConfig
from twinlog.journal.local_ops import Operation
from twinlog.journal.local_tables import Database, Tables
from twinlog.journal.map_backing import back_map_with_file
from twinlog.journal.map_lock import MapLock
from twinlog.journal.mapped_pages import MapAddresses, PageReleaser

DATA_FILE = "data.mdb"  # LMDB's, inside the environment directory

log = logging.getLogger(__name__)

# LMDB errors that mean the file is damaged (not a full disk, not our bug).
CORRUPTION_ERRORS = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.PanicError,
    lmdb.InvalidError,
    # MDB_BAD_TXN: a transaction poisoned by an earlier failure in it, which on a damaged
    # map is a lookup that tripped over a bad page.
    lmdb.BadTxnError,
    # MDB_BAD_DBI: a named database's record in the main tree (its flags) changed under
    # an open handle, which on a map no one else writes is a damaged page.
    lmdb.BadDbiError,
)


class _Request:
    __slots__ = ("done", "error", "operation", "result")

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.result: Any = None
        self.error: BaseException | None = None
        # A lock taken now and released by the writer: cheaper than an Event.
        self.done = threading.Lock()
        self.done.acquire()

    def wait(self) -> Any:
        """Block until the request's group is committed; its result, or raise its error."""
        self.done.acquire()
        if self.error is not None:
            raise self.error
        return self.result

    def failed(self) -> bool | None:
        """Without waiting: None while the request is not finished, else whether it
        failed (a request nobody waits for: its writer checks it later)."""
        if not self.done.acquire(blocking=False):
            return None
        self.done.release()  # finished stays finished for a later wait()
        return self.error is not None


PendingWrite = _Request  # what ``enqueue`` returns: ``wait()`` for the result

_STOP = object()
DELETE_HEADROOM_FRACTION = 8  # beyond map_size_bytes_max, deletes may grow the map by 1/8


def translate_lmdb_error(error: BaseException, path: str, doing: str) -> BaseException:
    """The typed error for an LMDB or OS failure (the original is kept as the cause)."""
    code = getattr(error, "code", None) or getattr(error, "errno", None)
    if code == errno.ENOSPC:
        return DiskFullError(
            f"local data journal {path}: no space left on the device while {doing}; "
            "nothing of it was kept. Free space on that volume, then retry"
        )
    if isinstance(error, CORRUPTION_ERRORS):
        return CorruptJournalError(
            f"local data journal {path} is damaged ({error}) while {doing}: stop the broker, "
            "copy the directory aside, and see docs/formats.md, 'Local data journal: Damage'"
        )
    return error


class GroupWriter:
    """The journal's writer thread. Thread rule: ``submit`` from any thread; the rest is internal."""

    def __init__(
        self,
        env: lmdb.Environment,
        databases: dict[bytes, Database],
        config: JournalConfig,
        map_lock: MapLock,
        map_addresses: MapAddresses,
        path: str,
    ) -> None:
        self._env = env
        self._databases = databases
        self._config = config
        self._map_lock = map_lock
        self._path = path
        # SimpleQueue is all C: no Python-level Condition on every put and get
        # (which cost more than the LMDB work of an append). The semaphore bounds
        # what may wait: a caller beyond queue_entries_max blocks (back-pressure).
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._slots = threading.BoundedSemaphore(config.queue_entries_max)
        self._closing = False
        # Deletes touch the map; only this thread ever resizes it, so releasing
        # pages here needs no lock.
        self._map_addresses = map_addresses
        self._releaser = PageReleaser(map_addresses)
        self._durability = GroupDurability(path)
        self._submit_lock = threading.Lock()  # orders submit() against close()
        # Requests queued (under _submit_lock) and finished, committed or failed (by the
        # writer thread, before it wakes their callers): equal means nothing is pending.
        self._requests_queued = 0
        self._requests_done = 0
        # Counters, written by the writer thread only (reads may be a group stale).
        self.groups_committed = 0
        self.requests_committed = 0
        self.map_resizes = 0
        self._thread = threading.Thread(
            target=self._run, name=f"journal-writer:{path}", daemon=True
        )
        self._thread.start()

    # --- callers -----------------------------------------------------------------

    def submit(self, operation: Operation) -> Any:
        """Run ``operation`` in the next group; return once that group is synced."""
        return self.enqueue(operation).wait()

    def enqueue(self, operation: Operation) -> _Request:
        """Queue ``operation`` and return at once; ``wait()`` on the result.

        Requests run in the order they were queued: a caller that queues under its
        own lock fixes the order of its operations (the journal logs' applier).
        """
        request = _Request(operation)
        self._slots.acquire()  # released by the writer when it takes the request
        with self._submit_lock:
            if self._closing:
                self._slots.release()
                raise LogClosedError(f"the local data journal {self._path} is closed; reopen it")
            self._queue.put(request)
            self._requests_queued += 1
        return request

    def idle(self) -> bool:
        """Is every request queued so far finished? (A barrier then has nothing to wait
        for: it returns at once instead of committing an empty group.)"""
        with self._submit_lock:
            return not self._closing and self._requests_done == self._requests_queued

    def close(self) -> None:
        """Finish every request queued so far, then stop the thread."""
        with self._submit_lock:
            if self._closing:
                return
            self._closing = True
            self._queue.put(_STOP)
        self._thread.join()
        self._durability.close()

    # --- the writer thread ----------------------------------------------------------

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is _STOP:
                return
            self._slots.release()
            group = [first]
            group_bytes = first.operation.size_bytes
            while (
                len(group) < self._config.group_entries_max
                and group_bytes < self._config.group_bytes_max
            ):
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop = True
                    break
                self._slots.release()
                group.append(more)
                group_bytes += more.operation.size_bytes
            try:
                self._write_group(group)
            except BaseException as error:  # never leave a caller blocked
                for request in group:
                    request.error = request.error or error
                log.exception("journal writer: group of %d failed", len(group))
            finally:
                self._requests_done += len(group)
                for request in group:
                    request.done.release()

    def _write_group(self, group: list[_Request]) -> None:
        while True:
            for request in group:
                request.result = request.error = None
            txn = self._env.begin(write=True, buffers=True)
            committed = False
            try:
                # the journal-log records are durable first (J1), the logs side by side
                self._durability.make_durable(
                    (
                        request.operation.durable_log,
                        request.operation.make_durable,
                        request.operation.size_bytes,
                    )
                    for request in group
                    if request.operation.make_durable is not None
                )
                tables = Tables(txn, self._databases, self._releaser)
                for request in group:
                    try:
                        request.operation.check(tables)
                    except TwinlogError as refusal:
                        request.error = refusal
                        request.operation.refused(tables)
                        continue
                    request.result = request.operation.apply(tables)
                tables.flush()
                failpoints.hit("journal.before_sync")
                started_s = time.monotonic()
                txn.commit()  # syncs, unless sync_mode is env_sync
                committed = True
                if self._config.sync_mode == SYNC_ENV:
                    self._env.sync(True)
                fsync_latency.LOCAL_JOURNAL.observe(time.monotonic() - started_s)
                failpoints.hit("journal.after_sync")
            except lmdb.MapFullError:
                if not committed:
                    txn.abort()
                group = self._make_room(group)
                if not group:
                    return
                continue
            except BaseException as error:
                if not committed:
                    txn.abort()
                typed = translate_lmdb_error(error, self._path, "writing a group")
                for request in group:
                    request.error = typed
                return
            self.groups_committed += 1
            self.requests_committed += len(group)
            return

    def _make_room(self, group: list[_Request]) -> list[_Request]:
        """Grow the map for ``group``; return what to retry (requests refused here are done).

        Operations that add data may grow the map up to ``map_size_bytes_max``.
        Beyond it, only operations that free space (apply, abort, purge) may grow
        it, by DELETE_HEADROOM_FRACTION more: LMDB copies pages on write, so even a
        delete needs fresh pages, and a journal full of data must still be able
        to drop it.
        """
        current_bytes = self._env.info()["map_size"]
        limit_bytes = self._config.map_size_bytes_max
        if current_bytes >= limit_bytes:
            full = DiskFullError(
                f"local data journal {self._path} is full at its largest map "
                f"({current_bytes} bytes, map_size_bytes_max); apply or abort transactions, "
                "or raise the limit"
            )
            adding = [r for r in group if r.operation.adds_data]
            for request in adding:
                request.error = full
            group = [r for r in group if not r.operation.adds_data]
            if not group:
                return group
            limit_bytes += limit_bytes // DELETE_HEADROOM_FRACTION
            if current_bytes >= limit_bytes:
                raise full
        self._grow_map(current_bytes, min(current_bytes * 2, limit_bytes))
        return group

    def _grow_map(self, current_bytes: int, new_bytes: int) -> None:
        # No write transaction is open (we just aborted ours); readers are held off
        # by the exclusive side of the map lock, since set_mapsize unmaps their views.
        with self._map_lock.exclusive():
            self._env.set_mapsize(new_bytes)
            back_map_with_file(os.path.join(self._path, DATA_FILE), new_bytes)
            self._map_addresses.map_replaced()
        self.map_resizes += 1
        log.info(
            "local data journal %s: map grown from %d to %d bytes",
            self._path,
            current_bytes,
            new_bytes,
        )
