"""The overview's live charts: records written and records consumed per topic, as rates.

The console samples what the client can see each time the overview is built: each
topic's high watermarks (records in) and the groups' committed offsets on it (records
consumed by groups), with ``--metrics`` each topic's log size (bytes in), and keeps the
last ``SAMPLES_MAX`` samples. A rate is the change between two samples over the time
between them. Bytes read per topic are counted nowhere (the brokers' metrics count fetch
bytes per request: the Grafana dashboard, docs/grafana/twinlog.json).
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass, field

from twinlog.rpc.console.charts import Series

SAMPLES_MAX = 60
SERIES_MAX = 8  # the busiest topics; more lines would not be readable


@dataclass(frozen=True)
class Sample:
    at_s: float
    written: dict[str, int]  # topic -> sum of its partitions' high watermarks
    consumed: dict[str, int]  # topic -> sum of groups' committed offsets on it
    lag: dict[str, int]  # group -> total lag
    sizes: dict[str, int] = field(default_factory=dict)  # topic -> bytes (brokers' metrics)


class ThroughputHistory:
    """Thread rule: any thread (pages are served on several)."""

    def __init__(self) -> None:
        self._samples: deque[Sample] = deque(maxlen=SAMPLES_MAX)
        self._lock = threading.Lock()

    def add(self, sample: Sample) -> None:
        with self._lock:
            if self._samples and sample.at_s - self._samples[-1].at_s < 0.5:
                self._samples.pop()  # two pages at once: keep the later sample
            self._samples.append(sample)

    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def rates(self, field: str) -> list[Series]:
        """Per topic, the rate between consecutive samples of ``written`` or ``consumed``
        (records) or ``sizes`` (bytes); a topic whose figure went down (deleted, reset,
        retention) has no point there."""
        samples = self.samples()
        points: dict[str, list[tuple[float, float]]] = {}
        for before, after in itertools.pairwise(samples):
            elapsed_s = after.at_s - before.at_s
            old, new = getattr(before, field), getattr(after, field)
            for topic, count in new.items():
                if topic in old and count >= old[topic] and elapsed_s > 0:
                    rate = (count - old[topic]) / elapsed_s
                    points.setdefault(topic, []).append((after.at_s, rate))
        return _busiest(points)

    def lag(self) -> list[Series]:
        points: dict[str, list[tuple[float, float]]] = {}
        for sample in self.samples():
            for group, lag in sample.lag.items():
                points.setdefault(group, []).append((sample.at_s, float(lag)))
        return _busiest(points)


def _busiest(points: dict[str, list[tuple[float, float]]]) -> list[Series]:
    ranked = sorted(points.items(), key=lambda item: -max(v for _, v in item[1]))
    return [Series(name, tuple(values)) for name, values in ranked[:SERIES_MAX]]
