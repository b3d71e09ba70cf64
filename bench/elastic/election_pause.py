"""The write pause a preferred-leader election causes.

A three-replica partition is written one acknowledged record at a time (``acks=all``)
by a producer on the cluster's bootstrap list (every cluster write waits for the
in-sync replicas). Its replicas are given a new order with
the same set (a reassignment that completes at once: the leader stays, but is no longer
the preferred one), then ``elect_preferred_leaders`` moves the leadership to the new
first replica while the writes go on. The pause is the longest gap between two
acknowledgements from just before the election to the end; the usual gap between two
acknowledgements is reported beside it for scale.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from typing import Any

from bench.cluster.cluster import BenchCluster
from bench.cluster.settings import BenchSettings
from bench.cluster.waiting import wait_for
from twinlog.rpc.client import Admin, Producer

STEADY_S = 1.0  # acknowledged writes before the election, and after it
RECORD = b"x" * 100


class _AcknowledgedWrites:
    """A thread writing one record at a time, keeping each acknowledgement's moment."""

    def __init__(self, bootstrap: str, topic: str, timeout_s: float) -> None:
        self.moments: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer(
            bootstrap, linger_ms=0, delivery_timeout_ms=round(timeout_s * 1000)
        )
        self._topic = topic
        self._thread = threading.Thread(target=self._run, name="election-writes", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._producer.send(self._topic, RECORD, partition=0).result()
            except Exception as error:  # retried inside the producer; kept for the report
                self.errors.append(f"{type(error).__name__}: {error}")
                continue
            self.moments.append(time.monotonic())

    def __enter__(self) -> _AcknowledgedWrites:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.close()


def preferred_election_pause(
    cluster: BenchCluster, bootstrap: str, topic: str, settings: BenchSettings
) -> dict[str, Any]:
    state = cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})[0]
    old_leader = state.leader
    followers = [b for b in state.replicas if b != old_leader]
    new_order = (followers[0], old_leader, followers[1])
    with (
        Admin(bootstrap) as admin,
        _AcknowledgedWrites(bootstrap, topic, settings.phase_timeout_s) as writes,
    ):
        wait_for(
            "acknowledged writes",
            lambda: len(writes.moments) >= 20 or len(writes.errors) > 100,
            settings.phase_timeout_s,
        )
        if len(writes.moments) < 20:
            raise RuntimeError(f"{topic}: the writes fail: {writes.errors[:3]}")
        (moved,) = admin.reassign_partitions({(topic, 0): new_order}, 0, 30_000)
        assert moved.error is None, moved.error
        wait_for(
            f"{topic}-0's replicas in the order {new_order}",
            lambda: (s := cluster.state(topic, 0)) is not None and s.replicas == new_order,
            settings.phase_timeout_s,
        )
        time.sleep(STEADY_S)
        election_s = time.monotonic()
        (result,) = admin.elect_preferred_leaders([(topic, 0)], timeout_ms=30_000)
        elected_s = time.monotonic()
        assert result.succeeded, result
        time.sleep(STEADY_S)
    moments = writes.moments
    before = [m for m in moments if m < election_s]
    around = [m for m in moments if m >= election_s - STEADY_S / 2]
    gaps_before = [b - a for a, b in itertools.pairwise(before)]
    gaps_around = [b - a for a, b in itertools.pairwise(around)]
    after_state = cluster.state(topic, 0)
    return {
        "old_leader": old_leader,
        "new_leader": None if after_state is None else after_state.leader,
        "election_call_ms": (elected_s - election_s) * 1000,
        "pause_ms": max(gaps_around) * 1000 if gaps_around else None,
        "usual_gap_ms": statistics.median(gaps_before) * 1000 if gaps_before else None,
        "writes_acknowledged": len(moments),
        "writes_failed": len(writes.errors),
        "first_errors": writes.errors[:3],
    }
