"""The broker's scheduler: each task's round runs at its interval, survives its own
failures, and stops with the broker."""

from __future__ import annotations

import threading
import time

import pytest

from twinlog.engine.broker.scheduler import ScheduledTask, Scheduler, checkpoint_and_purge

WAIT_S_MAX = 5.0


def wait_for(condition: threading.Event) -> None:
    assert condition.wait(WAIT_S_MAX), "the round did not run in time"


def test_a_failing_round_runs_again() -> None:
    rounds: list[int] = []
    ran_twice = threading.Event()

    def fail_first() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise OSError("disk hiccup")
        ran_twice.set()

    scheduler = Scheduler()
    scheduler.start([ScheduledTask("flaky", lambda: 1, fail_first)])
    try:
        wait_for(ran_twice)
    finally:
        scheduler.stop()
    assert rounds[:2] == [0, 1]


def test_the_interval_is_read_again_before_each_round() -> None:
    intervals_ms = iter([1, 60_000])  # then a long one: stop() must not wait it out
    asked: list[int] = []
    ran = threading.Event()

    def interval_ms() -> int:
        asked.append(1)
        return next(intervals_ms)

    scheduler = Scheduler()
    scheduler.start([ScheduledTask("changing", interval_ms, ran.set)])
    try:
        wait_for(ran)
        deadline = time.monotonic() + WAIT_S_MAX
        while len(asked) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(asked) == 2, "the interval was not read again after the first round"
    finally:
        started = time.monotonic()
        scheduler.stop()
    assert time.monotonic() - started < WAIT_S_MAX, "stop() waited out a 60 s interval"


def test_stop_ends_every_task_and_is_seen_by_rounds() -> None:
    counts = {"a": 0, "b": 0}
    both_ran = threading.Barrier(3)

    def task(name: str) -> ScheduledTask:
        def run_round() -> None:
            counts[name] += 1
            if counts[name] == 1:
                both_ran.wait(WAIT_S_MAX)

        return ScheduledTask(name, lambda: 1, run_round)

    scheduler = Scheduler()
    assert not scheduler.is_stopping()
    scheduler.start([task("a"), task("b")])
    both_ran.wait(WAIT_S_MAX)
    scheduler.stop()
    assert scheduler.is_stopping()
    after_stop = dict(counts)
    time.sleep(0.05)
    assert counts == after_stop, "a round ran after stop() returned"
    assert not [t for t in threading.enumerate() if t.name in ("a", "b")]


def test_run_round_runs_one_round_in_the_callers_thread() -> None:
    callers: list[str] = []
    scheduler = Scheduler()
    scheduler.start(
        [
            ScheduledTask(
                "manual", lambda: 60_000, lambda: callers.append(threading.current_thread().name)
            )
        ]
    )
    try:
        scheduler.run_round("manual")
    finally:
        scheduler.stop()
    assert callers == [threading.current_thread().name]
    with pytest.raises(KeyError):
        scheduler.run_round("unknown")


class _Recorded:
    def __init__(self, steps: list[str], name: str) -> None:
        self.steps, self.name = steps, name

    def checkpoint(self) -> None:
        self.steps.append(f"checkpoint {self.name}")

    def purge_below(self, low_watermark: int) -> None:
        self.steps.append(f"purge below {low_watermark}")


def test_the_marks_left_are_written_after_the_checkpoints_and_before_the_purge() -> None:
    """A committed transaction is below the low watermark: its partition's MARK_APPLIED
    must be written before the purge reads the row (an APPLYING row would be kept)."""
    steps: list[str] = []
    checkpoint_and_purge(
        [_Recorded(steps, "c0"), _Recorded(steps, "c1")],  # type: ignore[list-item]
        _Recorded(steps, "journal"),  # type: ignore[arg-type]
        lambda: 7,
        lambda: steps.append("write marks left"),
    )
    assert steps == ["checkpoint c0", "checkpoint c1", "write marks left", "purge below 7"]
