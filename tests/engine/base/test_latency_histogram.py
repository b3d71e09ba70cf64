"""The latency accumulator behind the fsync, commit and apply figures."""

from __future__ import annotations

import threading

import pytest

from twinlog.engine.base.latency_histogram import LatencyHistogram


def test_counts_sums_and_buckets_with_inclusive_bounds() -> None:
    histogram = LatencyHistogram((0.001, 0.01))
    for duration_s in (0.0005, 0.001, 0.005, 0.5):
        histogram.observe(duration_s)
    snapshot = histogram.snapshot()
    assert snapshot.count == 4
    assert snapshot.sum_s == pytest.approx(0.5065)
    assert snapshot.bucket_counts == (2, 1, 1)  # 0.001 falls in its own bucket ("le")
    assert snapshot.cumulative() == [(0.001, 2), (0.01, 3), (float("inf"), 4)]


def test_refuses_bounds_that_do_not_increase() -> None:
    for bounds in ((), (0.1, 0.1), (0.2, 0.1), (0.0, 1.0)):
        with pytest.raises(ValueError):
            LatencyHistogram(bounds)


def test_concurrent_observers_lose_no_count() -> None:
    histogram = LatencyHistogram()

    def observe_many() -> None:
        for _ in range(5_000):
            histogram.observe(0.002)

    threads = [threading.Thread(target=observe_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert histogram.snapshot().count == 20_000
    assert sum(histogram.snapshot().bucket_counts) == 20_000
