"""A write group's journal logs are made durable side by side, each log's calls in order;
groups with little to sync stay on the calling thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from twinlog.journal.group_durability import OVERLAP_BYTES_MIN, GroupDurability

LARGE = OVERLAP_BYTES_MIN  # a record this large makes its log worth syncing on another thread


def test_different_logs_are_synced_at_the_same_time() -> None:
    # Each call waits for the other: only side by side do both pass the barrier.
    both = threading.Barrier(2, timeout=5)
    durability = GroupDurability("test")
    try:
        durability.make_durable([("log-a", both.wait, LARGE), ("log-b", both.wait, LARGE)])
    finally:
        durability.close()
    assert not both.broken


def test_one_logs_calls_run_in_order_on_one_thread() -> None:
    seen: list[tuple[str, int, int]] = []
    lock = threading.Lock()

    def call(log_key: str, number: int) -> tuple[str, Callable[[], None], int]:
        def run() -> None:
            time.sleep(0.002 * (3 - number))  # later calls are quicker: order must hold anyway
            with lock:
                seen.append((log_key, number, threading.get_ident()))

        return log_key, run, LARGE

    durability = GroupDurability("test")
    try:
        durability.make_durable(
            [call("a", 0), call("b", 0), call("a", 1), call("b", 1), call("a", 2)]
        )
    finally:
        durability.close()
    for log_key, count in (("a", 3), ("b", 2)):
        mine = [entry for entry in seen if entry[0] == log_key]
        assert [number for _, number, _ in mine] == list(range(count))
        assert len({thread for _, _, thread in mine}) == 1


def test_a_failed_sync_is_raised_after_every_other_sync_finished() -> None:
    finished = threading.Event()

    def slow() -> None:
        time.sleep(0.05)
        finished.set()

    def failing() -> None:
        raise OSError(5, "I/O error")

    durability = GroupDurability("test")
    try:
        with pytest.raises(OSError, match="I/O error"):
            durability.make_durable([("a", failing, LARGE), ("b", slow, LARGE)])
        assert finished.is_set()  # no sync still running when the group is retried
    finally:
        durability.close()


def test_a_single_log_runs_on_the_calling_thread() -> None:
    threads: list[int] = []
    durability = GroupDurability("test")
    durability.make_durable([("a", lambda: threads.append(threading.get_ident()), LARGE)] * 2)
    assert threads == [threading.get_ident()] * 2
    assert durability._pool is None  # no thread started for nothing to overlap
    durability.close()


def test_small_records_of_several_logs_are_synced_in_line_in_queue_order() -> None:
    """A transaction's marks on four partitions: four small syncs, cheaper one after
    another on the writer thread than handed to others."""
    seen: list[tuple[str, int]] = []

    def call(log_key: str, size_bytes: int) -> tuple[str, Callable[[], None], int]:
        return log_key, lambda: seen.append((log_key, threading.get_ident())), size_bytes

    durability = GroupDurability("test")
    try:
        # One log with a large record and three small ones: still nothing to overlap.
        durability.make_durable(
            [call("a", LARGE), call("b", 40), call("c", 40), call("d", OVERLAP_BYTES_MIN - 1)]
        )
        assert seen == [(key, threading.get_ident()) for key in "abcd"]
        assert durability._pool is None
        # A log's small records add up: two logs of large groups overlap.
        durability.make_durable([call("a", LARGE // 2), call("b", LARGE), call("a", LARGE // 2)])
        assert durability._pool is not None
    finally:
        durability.close()
