"""The one purgatory for every read that may wait (Kafka's DelayedFetch purgatory).

A consumer's fetch, a follower's fetch and both front doors' long polls wait here for
new data on the partitions they read, instead of each polling in a loop of its own:

    long_poll.poll(keys, read, enough, max_wait_s)

calls ``read()`` once; if that is not enough and it may wait, it registers the waiter
under each key (a partition), then calls ``read()`` until ``enough(result)`` or the time
is up, sleeping in between until one of its keys is woken.
Whoever moves what a reader may see (an append, a high watermark, a copy applied, a role
change) calls ``wake(key)``; a closing broker calls ``wake_all()``. The waiter is
registered before it reads, so a wake between its read and its sleep is never lost.

A waiter has one event of its own, woken only by its keys: a partition's append wakes the
readers of that partition, not every reader of the broker.

Thread rule: any thread; ``_lock`` guards the table of waiters, held only to add, remove
and wake (never while reading).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Hashable
from typing import TypeVar

Result = TypeVar("Result")


class LongPoll:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> the events of the waiters reading it (an entry is removed when empty)
        self._waiting: dict[Hashable, set[threading.Event]] = {}

    def wake(self, key: Hashable) -> None:
        """Something a reader of ``key`` may see changed: its waiters read again."""
        with self._lock:
            for woken in self._waiting.get(key, ()):
                woken.set()

    def wake_all(self) -> None:
        """Every waiter reads again (a closing broker: they see it and return)."""
        with self._lock:
            for waiters in self._waiting.values():
                for woken in waiters:
                    woken.set()

    def poll(
        self,
        keys: Collection[Hashable],
        read: Callable[[], Result],
        enough: Callable[[Result], bool],
        max_wait_s: float,
        slice_s: float | None = None,
    ) -> Result:
        """``read()`` until ``enough`` of it, or ``max_wait_s`` has passed: the last read.
        ``slice_s``: read again at least this often even if no key is woken (a safety net
        for a change nobody wakes). What ``read`` raises ends the poll."""
        deadline_s = time.monotonic() + max(0.0, max_wait_s)
        result = read()  # the common case (data there, or no wait) costs no registration
        if enough(result) or max_wait_s <= 0:
            return result
        woken = threading.Event()
        with self._lock:
            for key in keys:
                self._waiting.setdefault(key, set()).add(woken)
        try:
            while True:
                woken.clear()  # a wake from here on is seen by the wait below
                result = read()
                remaining_s = deadline_s - time.monotonic()
                if enough(result) or remaining_s <= 0:
                    return result
                woken.wait(remaining_s if slice_s is None else min(remaining_s, slice_s))
        finally:
            with self._lock:
                for key in keys:
                    waiters = self._waiting.get(key)
                    if waiters is not None:
                        waiters.discard(woken)
                        if not waiters:
                            del self._waiting[key]

    def waiting_count(self) -> int:
        """How many keys have waiters (for tests and figures)."""
        with self._lock:
            return len(self._waiting)
