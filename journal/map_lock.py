"""Keeps LMDB read transactions and a map resize (or close) apart.

``env.set_mapsize`` replaces the memory map: every open transaction and cursor
of the environment is invalidated, and a zero-copy buffer handed out by a read
transaction would point at unmapped memory. So every read transaction runs
under ``shared()``, and the writer thread resizes (and ``close`` closes) under
``exclusive()``. Exclusive is preferred: once it waits, new readers wait too,
so a stream of short reads cannot starve a resize. Long readers (the copier's
stream) renew their read transaction every ``read_chunk_bytes``, which bounds
how long a resize waits.

Thread rule: any thread. Not reentrant: a thread holding ``shared()`` must not
ask for it again while an exclusive waiter exists (it would deadlock), so
journal methods never nest read transactions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class MapLock:
    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._readers = 0
        self._exclusive_held = False
        self._exclusive_waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._condition:
            while self._exclusive_held or self._exclusive_waiting:
                self._condition.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                if self._readers == 0:
                    self._condition.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._condition:
            self._exclusive_waiting += 1
            try:
                while self._exclusive_held or self._readers:
                    self._condition.wait()
            finally:
                self._exclusive_waiting -= 1
            self._exclusive_held = True
        try:
            yield
        finally:
            with self._condition:
                self._exclusive_held = False
                self._condition.notify_all()

    @property
    def reader_count(self) -> int:
        return self._readers
