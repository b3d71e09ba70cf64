"""Capped exponential backoff between a fetcher's failed rounds."""

from __future__ import annotations


class Backoff:
    """``next_s()`` gives first_ms, then doubles up to max_ms; ``reset()`` after a success.

    Not jittered: one fetcher per leader, so followers of a restarted leader retrying in
    step cost a handful of calls, not a storm.
    """

    def __init__(self, first_ms: int, max_ms: int) -> None:
        if first_ms <= 0 or max_ms < first_ms:
            raise ValueError(f"backoff needs 0 < first_ms <= max_ms, got {first_ms}, {max_ms}")
        self.first_ms = first_ms
        self.max_ms = max_ms
        self._next_ms = first_ms

    def next_s(self) -> float:
        current = self._next_ms
        self._next_ms = min(current * 2, self.max_ms)
        return current / 1000

    def reset(self) -> None:
        self._next_ms = self.first_ms
