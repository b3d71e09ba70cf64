"""Byte ranges of one segment whose batches this process has checked (CRC and offsets).

The broker checks a batch's CRC once in memory: at the door (produce), in the
copier (APPLY_COMMIT), or in recovery's scan. Bytes that lie before the
recovery point on open were checked by an earlier process only, so the first
read of them checks them again (``DataLog.read``), and remembers it here, so a
tailing consumer, or the second consumer of the same bytes, pays nothing.

Ranges are half-open ``[start, end)`` positions, kept sorted, disjoint and
merged when they touch. Thread rule: any thread; one small lock.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right


class CheckedRanges:
    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._lock = threading.Lock()

    def covers(self, start: int, end: int) -> bool:
        """Were all bytes of ``[start, end)`` checked?"""
        with self._lock:
            number = bisect_right(self._starts, start) - 1
            return number >= 0 and self._ends[number] >= end

    def add(self, start: int, end: int) -> None:
        if start >= end:
            return
        with self._lock:
            starts, ends = self._starts, self._ends
            low = bisect_left(ends, start)  # first range that ends at or after start
            high = bisect_right(starts, end)  # ranges from here on start after end
            if low < high:
                start = min(start, starts[low])
                end = max(end, ends[high - 1])
            starts[low:high] = [start]
            ends[low:high] = [end]

    def cut(self, position: int) -> None:
        """Forget every byte from ``position`` on (the segment was truncated there)."""
        with self._lock:
            number = bisect_left(self._ends, position + 1)
            del self._starts[number + 1 :], self._ends[number + 1 :]
            if number < len(self._starts):
                if self._starts[number] >= position:
                    del self._starts[number], self._ends[number]
                else:
                    self._ends[number] = position

    def ranges(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(zip(self._starts, self._ends, strict=True))
