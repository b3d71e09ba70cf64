"""The one purgatory: a waiter reads again when one of its keys is woken, never misses a
wake that came between its read and its sleep, is not woken by other keys, and leaves
nothing behind."""

from __future__ import annotations

import threading
import time

import pytest

from twinlog.engine.base.long_poll import LongPoll


def test_a_waiter_returns_when_its_key_is_woken() -> None:
    long_poll = LongPoll()
    box: list[int] = []
    threading.Timer(0.2, lambda: (box.append(1), long_poll.wake("p0"))).start()
    started = time.monotonic()
    result = long_poll.poll(["p0", "p1"], lambda: list(box), bool, max_wait_s=10)
    assert result == [1]
    assert time.monotonic() - started < 5
    assert long_poll.waiting_count() == 0


def test_a_wake_between_the_read_and_the_sleep_is_not_lost() -> None:
    long_poll = LongPoll()
    box: list[int] = []
    reads = 0

    def read() -> list[int]:
        nonlocal reads
        reads += 1
        seen = list(box)
        if reads == 1:  # data arrives, and is announced, right after this read
            box.append(1)
            long_poll.wake("p0")
        return seen

    started = time.monotonic()
    assert long_poll.poll(["p0"], read, bool, max_wait_s=10) == [1]
    assert time.monotonic() - started < 5 and reads == 2


def test_other_keys_do_not_wake_it_and_the_wait_ends_at_its_time() -> None:
    long_poll = LongPoll()
    reads = 0

    def read() -> None:
        nonlocal reads
        reads += 1

    stop = threading.Event()

    def wake_others() -> None:
        while not stop.is_set():
            long_poll.wake("other")
            time.sleep(0.01)

    waker = threading.Thread(target=wake_others)
    waker.start()
    try:
        started = time.monotonic()
        long_poll.poll(["mine"], read, lambda _: False, max_wait_s=0.3)
        assert 0.25 <= time.monotonic() - started < 5
    finally:
        stop.set()
        waker.join()
    # once before registering, once after (a wake between the two is not lost); not when
    # its time was up (nothing woke it: nothing changed); never for the other key's wakes
    assert reads == 2


def test_registered_first_an_idle_poll_reads_once_and_a_wake_reads_again() -> None:
    long_poll = LongPoll()
    reads: list[int] = []

    def read() -> int:
        reads.append(len(reads))
        return len(reads)

    started = time.monotonic()
    assert long_poll.poll(["mine"], read, lambda _: False, 0.2, register_first=True) == 1
    assert time.monotonic() - started >= 0.15
    assert reads == [0]  # registered, read once, nothing woke it
    assert long_poll.waiting_count() == 0

    reads.clear()
    waker = threading.Timer(0.05, lambda: long_poll.wake("mine"))
    waker.start()
    try:
        result = long_poll.poll(["mine"], read, lambda n: n >= 2, 5.0, register_first=True)
    finally:
        waker.join()
    assert result == 2 and reads == [0, 1]  # the wake read again, and that was enough


def test_wake_all_and_the_slice_read_again() -> None:
    long_poll = LongPoll()
    reads = 0

    def read() -> int:
        nonlocal reads
        reads += 1
        return reads

    threading.Timer(0.2, long_poll.wake_all).start()
    assert long_poll.poll(["p0"], read, lambda n: n >= 2, max_wait_s=10) == 2
    started = time.monotonic()
    assert long_poll.poll(["p0"], read, lambda n: n >= 5, max_wait_s=10, slice_s=0.05) == 5
    assert time.monotonic() - started < 5


def test_what_read_raises_ends_the_poll_and_unregisters() -> None:
    long_poll = LongPoll()

    def read() -> None:
        raise ValueError("gone")

    with pytest.raises(ValueError, match="gone"):
        long_poll.poll(["p0"], read, bool, max_wait_s=10)
    assert long_poll.waiting_count() == 0


def test_read_again_reads_only_the_woken_keys_and_a_slice_reads_all() -> None:
    """A follower's fetch of many partitions: one partition's append re-reads that one."""
    long_poll = LongPoll()
    data: dict[str, list[int]] = {"p0": [], "p1": [], "p2": []}
    full_reads = 0
    read_again_keys: list[set[object]] = []

    def read() -> dict[str, list[int]]:
        nonlocal full_reads
        full_reads += 1
        return {key: list(values) for key, values in data.items()}

    def read_again(woken: set[object]) -> dict[str, list[int]]:
        read_again_keys.append(set(woken))
        return {key: list(values) for key, values in data.items()}

    def append_to_p1() -> None:
        data["p1"].append(7)
        long_poll.wake("p1")

    threading.Timer(0.2, append_to_p1).start()
    result = long_poll.poll(
        list(data),
        read,
        lambda answer: any(answer.values()),
        max_wait_s=10,
        read_again=read_again,
    )
    assert result["p1"] == [7]
    assert full_reads == 2  # before and after registering; the wake re-read p1 alone
    assert read_again_keys == [{"p1"}]
    # No wake at all: the slice's safety net reads everything again.
    full_reads = 0
    long_poll.poll(
        ["p3"], read, lambda _: False, max_wait_s=0.35, slice_s=0.1, read_again=read_again
    )
    assert full_reads >= 4 and read_again_keys == [{"p1"}]
    # wake_all (a closing broker) reads everything too.
    full_reads = 0
    threading.Timer(0.1, long_poll.wake_all).start()
    long_poll.poll(["p3"], read, lambda _: full_reads >= 3, max_wait_s=10, read_again=read_again)
    assert full_reads == 3 and read_again_keys == [{"p1"}]
    assert long_poll.waiting_count() == 0
