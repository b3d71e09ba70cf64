"""A thread-safe map that keeps at most ``entries_max`` entries, dropping the oldest put.

For answers that never change once known (a producer id's transactional id) and cost a
network call to learn: kept as long as there is room, never stale.

Thread rule: any thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

Key = TypeVar("Key")
Value = TypeVar("Value")


class BoundedCache(Generic[Key, Value]):
    def __init__(self, entries_max: int) -> None:
        if entries_max <= 0:
            raise ValueError(f"entries_max must be positive, got {entries_max}")
        self.entries_max = entries_max
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, Value] = OrderedDict()  # oldest put first

    def get(self, key: Key) -> Value | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Key, value: Value) -> None:
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self.entries_max:
                self._entries.popitem(last=False)
            assert len(self._entries) <= self.entries_max

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
