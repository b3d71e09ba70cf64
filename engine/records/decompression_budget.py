"""A broker-wide bound on decompressed records sections held at once: by produce
requests' checks, by ListOffsets by timestamp, and by compaction.

Each produced section is bounded by ``batch_decompressed_bytes_max``; this bounds their
sum, so that many requests at once (128 worker threads, from both doors: gRPC and Kafka)
cannot add up to gigabytes. A request reserves what its section decompresses to (what
it declares, or what it was counted to in dropped pieces: ``compression``) before
holding it; when the budget is spent it waits a little for others to finish, then is
refused as retriable. A stored batch read back (``reserve_section``) is charged the same
way, so readers and writers share the one bound.

Thread rule: any thread; the condition guards ``_reserved_bytes`` and
``_peak_reserved_bytes``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from twinlog.engine.base.errors import NotEnoughResourcesError
from twinlog.engine.records.compression import (
    CODEC_NONE,
    DECOMPRESSED_BYTES_MAX,
    decompressed_size,
)

WAIT_MS_DEFAULT = 5_000


class DecompressionBudget:
    def __init__(self, bytes_max: int, wait_ms: int = WAIT_MS_DEFAULT) -> None:
        self.bytes_max = bytes_max
        self.wait_ms = wait_ms
        self._reserved_bytes = 0
        self._peak_reserved_bytes = 0
        self._changed = threading.Condition()

    @property
    def reserved_bytes(self) -> int:
        return self._reserved_bytes

    @property
    def peak_reserved_bytes(self) -> int:
        """The most ever reserved at once: what shows the bound held (tests, diagnostics)."""
        return self._peak_reserved_bytes

    @contextmanager
    def reserve(self, size_bytes: int) -> Iterator[None]:
        """Hold ``size_bytes`` (at most ``bytes_max``) of the budget for the ``with`` block."""
        size_bytes = min(size_bytes, self.bytes_max)
        deadline = time.monotonic() + self.wait_ms / 1000
        with self._changed:
            while self._reserved_bytes + size_bytes > self.bytes_max:
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    raise NotEnoughResourcesError(
                        f"{self._reserved_bytes} bytes of batches are being decompressed, the "
                        f"broker's decompressed_bytes_in_flight_max ({self.bytes_max}) leaves "
                        f"no room for {size_bytes} more; retry shortly"
                    )
                self._changed.wait(remaining_s)
            self._reserved_bytes += size_bytes
            self._peak_reserved_bytes = max(self._peak_reserved_bytes, self._reserved_bytes)
        try:
            yield
        finally:
            with self._changed:
                self._reserved_bytes -= size_bytes
                self._changed.notify_all()

    @contextmanager
    def reserve_section(self, codec: int, section: bytes | memoryview) -> Iterator[None]:
        """Hold what a stored records section decompresses to (declared, else counted in
        dropped pieces, up to ``compression.DECOMPRESSED_BYTES_MAX``) while the block
        decompresses it; nothing for an uncompressed one (read in place)."""
        if codec == CODEC_NONE:
            yield
            return
        with self.reserve(decompressed_size(codec, section, DECOMPRESSED_BYTES_MAX)):
            yield


@contextmanager
def section_reserved(
    budget: DecompressionBudget | None, codec: int, section: bytes | memoryview
) -> Iterator[None]:
    """``budget.reserve_section``, or nothing without a budget (a log opened outside a
    broker: tools, tests)."""
    if budget is None:
        yield
        return
    with budget.reserve_section(codec, section):
        yield
