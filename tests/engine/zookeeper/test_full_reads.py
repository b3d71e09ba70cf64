"""The safety-net full read's pause: the configured interval, or nine times a long read."""

from __future__ import annotations

import pytest

from twinlog.engine.zookeeper.full_reads import next_full_read_s


@pytest.mark.parametrize(
    ("started_s", "finished_s", "interval_s", "due_s"),
    [
        (100.0, 100.1, 5.0, 105.0),  # a quick read: the interval, from its start
        (100.0, 100.5, 5.0, 105.0),  # 0.5 s read: 9 x 0.5 = 4.5 s after it ends, the same
        (100.0, 102.0, 5.0, 120.0),  # a 2 s read (10,000 partitions): 18 s after it ends
        (100.0, 100.0, 0.01, 100.01),
    ],
)
def test_the_next_full_read_waits_the_interval_or_nine_times_the_read(
    started_s: float, finished_s: float, interval_s: float, due_s: float
) -> None:
    assert next_full_read_s(started_s, finished_s, interval_s) == pytest.approx(due_s)
