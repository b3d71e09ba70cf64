"""When the log fsyncs: after every append, or once enough bytes or time have piled up.

"every_append" (the default) fsyncs before ``append_as_leader`` returns, so an
acknowledged batch survives a crash of the machine. "interval" fsyncs when
``flush_interval_bytes`` are unflushed or the last fsync is
``flush_interval_ms`` old, checked on each append: an acknowledged batch
survives a crash of the process (it is in the page cache), but a power loss
may take the batches since the last fsync, as Kafka's default settings allow.
``append_all_as_leader`` always fsyncs once at its end.

A check on append alone would leave the last appends of a burst unflushed
until the next append, however late that comes; so the log's owner also calls
``DataLog.flush_if_due`` periodically (the broker every ``flush_interval_ms / 2``),
which fsyncs once ``due()`` says the unflushed bytes waited long enough.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from twinlog.engine.log.config import FLUSH_EVERY_APPEND, LogConfig


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class FlushPolicy:
    """Counts unflushed bytes and time. Thread rule: the log's writer thread only."""

    def __init__(self, config: LogConfig, clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self.unflushed_bytes = 0
        self.last_flush_ms = clock_ms()

    def note_append(self, size_bytes: int) -> bool:
        """Record an append; True when the log must fsync now."""
        self.unflushed_bytes += size_bytes
        if self.config.flush_policy == FLUSH_EVERY_APPEND:
            return True
        return (
            self.unflushed_bytes >= self.config.flush_interval_bytes
            or self.clock_ms() - self.last_flush_ms >= self.config.flush_interval_ms
        )

    def due(self) -> bool:
        """True when bytes are unflushed and the last fsync is ``flush_interval_ms`` old.

        The time rule of ``note_append``, for a caller with no append to make:
        every unflushed byte arrived after the last fsync, so none is older.
        """
        return (
            self.unflushed_bytes > 0
            and self.clock_ms() - self.last_flush_ms >= self.config.flush_interval_ms
        )

    def note_flushed(self) -> None:
        self.unflushed_bytes = 0
        self.last_flush_ms = self.clock_ms()
