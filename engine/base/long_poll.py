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
readers of that partition, not every reader of the broker. It also learns which of its
keys were woken: a reader of many keys may pass ``read_again(woken_keys)``, called
instead of ``read()`` after a wake, to read only those again (a follower's fetch of every
partition it follows from a leader, where one append used to re-read them all). A wake
by ``wake_all``, and the safety net of ``slice_s``, still call ``read()``.

Without ``slice_s`` the caller says every change it must see wakes one of its keys, so a
wait that ends at the deadline without a wake returns the last read instead of reading
again. ``register_first`` registers before the first read, so an idle poll reads once,
not twice: for a reader of thousands of keys (a follower's fetch of every partition it
follows from a leader) the read costs far more than the registration.

Thread rule: any thread; ``_lock`` guards the table of waiters, held only to add, remove
and wake (never while reading).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Hashable
from typing import TypeVar

Result = TypeVar("Result")


class _Waiter:
    """One poll's event, and the keys woken since it last read (``_lock`` guards them)."""

    __slots__ = ("event", "everything", "keys")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.keys: set[Hashable] = set()
        self.everything = False  # woken by wake_all: read all again

    def take(self) -> tuple[set[Hashable], bool]:
        """The keys woken and whether everything was (lock held); cleared, with the
        event, so a wake from here on is seen by the next wait."""
        keys, everything = self.keys, self.everything
        self.keys, self.everything = set(), False
        self.event.clear()
        return keys, everything


class LongPoll:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> the waiters reading it (an entry is removed when empty)
        self._waiting: dict[Hashable, set[_Waiter]] = {}

    def wake(self, key: Hashable) -> None:
        """Something a reader of ``key`` may see changed: its waiters read again."""
        with self._lock:
            for waiter in self._waiting.get(key, ()):
                waiter.keys.add(key)
                waiter.event.set()

    def wake_all(self) -> None:
        """Every waiter reads again (a closing broker: they see it and return)."""
        with self._lock:
            for waiters in self._waiting.values():
                for waiter in waiters:
                    waiter.everything = True
                    waiter.event.set()

    def poll(
        self,
        keys: Collection[Hashable],
        read: Callable[[], Result],
        enough: Callable[[Result], bool],
        max_wait_s: float,
        slice_s: float | None = None,
        read_again: Callable[[set[Hashable]], Result] | None = None,
        *,
        register_first: bool = False,
    ) -> Result:
        """``read()`` until ``enough`` of it, or ``max_wait_s`` has passed: the last read.
        ``slice_s``: read again at least this often even if no key is woken (a safety net
        for a change nobody wakes). ``read_again(woken_keys)``: after a wake of some keys,
        called instead of ``read()`` (the caller keeps the rest of its last read). What
        either raises ends the poll."""
        deadline_s = time.monotonic() + max(0.0, max_wait_s)
        if max_wait_s <= 0:
            return read()
        if not register_first:
            result = read()  # the common case (data there) costs no registration
            if enough(result):
                return result
        waiter = _Waiter()
        with self._lock:
            for key in keys:
                self._waiting.setdefault(key, set()).add(waiter)
        try:
            result = read()  # registered now: a wake from here on is not lost
            while True:
                remaining_s = deadline_s - time.monotonic()
                if enough(result) or remaining_s <= 0:
                    return result
                woke = waiter.event.wait(
                    remaining_s if slice_s is None else min(remaining_s, slice_s)
                )
                if not woke and slice_s is None:
                    return result  # the deadline, and nothing changed since the last read
                with self._lock:
                    woken_keys, everything = waiter.take()
                if read_again is not None and woke and woken_keys and not everything:
                    result = read_again(woken_keys)
                else:
                    result = read()
        finally:
            with self._lock:
                for key in keys:
                    waiters = self._waiting.get(key)
                    if waiters is not None:
                        waiters.discard(waiter)
                        if not waiters:
                            del self._waiting[key]

    def waiting_count(self) -> int:
        """How many keys have waiters (for tests and figures)."""
        with self._lock:
            return len(self._waiting)
