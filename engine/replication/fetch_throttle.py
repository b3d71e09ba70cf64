"""A follower's limit on how fast it copies one partition, in bytes per second (a
reassignment's ``--throttle-bytes-per-s``: a new replica catching up must not take the
disk and network its brokers serve clients with; Kafka's replication throttle).

A follower asks a throttled partition for a second's worth at most (``max_bytes`` of
the partition in its fetch), and keeps a debt: an answer may still bring more (the
leader answers one whole batch, however large), and the partition then sits out the
fetches until the time those bytes are worth has passed. Over any run the rate holds.

Thread rule: any thread; one lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class FetchThrottle:
    def __init__(self, bytes_per_s: int, clock_s: Callable[[], float] = time.monotonic) -> None:
        if bytes_per_s <= 0:
            raise ValueError(f"a throttle of {bytes_per_s} bytes/s: give 1 or more")
        self.bytes_per_s = bytes_per_s
        self._clock_s = clock_s
        self._lock = threading.Lock()
        self._free_at_s = clock_s()  # when the bytes copied so far are paid for

    def may_fetch(self) -> bool:
        """Whether the partition may be fetched now."""
        with self._lock:
            return self._clock_s() >= self._free_at_s

    def copied(self, size_bytes: int) -> None:
        """``size_bytes`` were copied now."""
        with self._lock:
            self._free_at_s = max(self._free_at_s, self._clock_s()) + size_bytes / self.bytes_per_s
