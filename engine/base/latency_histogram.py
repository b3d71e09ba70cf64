"""A latency accumulator: count, sum and bucket counts of durations, as a histogram has.

The engine runs embedded, without a metrics library; a server exports these
figures (``twinlog.rpc.server.metrics``). Observing costs a lock and three adds,
so it may sit on every fsync.

    fsyncs = LatencyHistogram()
    started_s = time.monotonic()
    os.fsync(fd)
    fsyncs.observe(time.monotonic() - started_s)

Thread rule: any thread may observe and take snapshots, concurrently.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from dataclasses import dataclass

# Upper bounds in seconds, from a fast SSD fsync (~0.1 ms) to a stalled disk; the last
# bucket (+Inf) is implicit.
BUCKETS_S_DEFAULT: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


@dataclass(frozen=True)
class LatencySnapshot:
    """What a histogram held at one moment."""

    count: int
    sum_s: float
    bounds_s: tuple[float, ...]  # the finite upper bounds
    bucket_counts: tuple[int, ...]  # per bound (not cumulative), then the +Inf overflow

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), ending with (inf, count)."""
        found = []
        total = 0
        for bound, count in zip((*self.bounds_s, float("inf")), self.bucket_counts, strict=True):
            total += count
            found.append((bound, total))
        return found


class LatencyHistogram:
    def __init__(self, bounds_s: Sequence[float] = BUCKETS_S_DEFAULT) -> None:
        bounds = tuple(float(bound) for bound in bounds_s)
        if list(bounds) != sorted(set(bounds)) or not bounds or bounds[0] <= 0:
            raise ValueError(f"bucket bounds must be positive and increasing, got {bounds}")
        self.bounds_s = bounds
        self._lock = threading.Lock()
        self._count = 0
        self._sum_s = 0.0
        self._bucket_counts = [0] * (len(bounds) + 1)

    def observe(self, duration_s: float) -> None:
        # A bound is inclusive (Prometheus's "le"): bisect_left puts 0.001 in the 0.001 bucket.
        index = bisect.bisect_left(self.bounds_s, duration_s)
        with self._lock:
            self._count += 1
            self._sum_s += duration_s
            self._bucket_counts[index] += 1

    def snapshot(self) -> LatencySnapshot:
        with self._lock:
            return LatencySnapshot(
                self._count, self._sum_s, self.bounds_s, tuple(self._bucket_counts)
            )
