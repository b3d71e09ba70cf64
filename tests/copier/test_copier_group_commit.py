"""Group commit at the copier: the commit calls of several callers (coordinators, lanes)
that arrive while a copy runs are copied together by whichever takes the writer next,
one replicated wait for the group, and each caller gets its own transaction's range."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from copier_support import PartitionFixture, body, log_bodies, transactional_batch

from twinlog.copier import CommitCall
from twinlog.journal import CopyState

QUEUE_WAIT_S = 10.0


def _journal(partition: PartitionFixture, *transaction_ids: int) -> None:
    for transaction_id in transaction_ids:
        partition.j.append(partition.name, transaction_id, transactional_batch(transaction_id))


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline_s = time.monotonic() + QUEUE_WAIT_S
    while not condition():
        assert time.monotonic() < deadline_s, what
        time.sleep(0.001)


def _wait_queued(partition: PartitionFixture, callers: int) -> None:
    queue = partition.writer._queued  # the queue under test
    _wait_until(lambda: len(queue) >= callers, "the callers never queued")


def _blocked_first_copy(partition: PartitionFixture) -> tuple[list[int], threading.Event]:
    """The first copy's replicated wait blocks until the event is set; every wait's end
    offset is recorded."""
    waits: list[int] = []
    release = threading.Event()

    def wait_replicated(end_offset: int) -> None:
        waits.append(end_offset)
        assert release.wait(QUEUE_WAIT_S)

    partition.writer.wait_replicated = wait_replicated
    return waits, release


def _apply_in_thread(
    partition: PartitionFixture, transaction_id: int, results: dict[str, object], key: str
) -> threading.Thread:
    def run() -> None:
        results[key] = partition.writer.apply_commit(transaction_id)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_commits_arriving_during_a_copy_are_copied_as_one_group(tmp_path: Path) -> None:
    partition = PartitionFixture(tmp_path)
    try:
        _journal(partition, 1, 2, 3)
        waits, release = _blocked_first_copy(partition)
        results: dict[str, object] = {}
        first = _apply_in_thread(partition, 1, results, "first")
        _wait_until(lambda: bool(waits), "the first copy never reached its wait")
        second = _apply_in_thread(partition, 2, results, "second")
        third = _apply_in_thread(partition, 3, results, "third")
        _wait_queued(partition, 2)
        release.set()
        for thread in (first, second, third):
            thread.join(QUEUE_WAIT_S)
        # Two copies: the first alone, then the two that queued behind it together.
        assert len(waits) == 2, waits
        assert results["first"] == (0, 2)
        ranges = sorted([results["second"], results["third"]])  # arrival order decides
        assert ranges == [(2, 4), (4, 6)]
        assert waits == [2, 6]
        order = [2, 3] if results["second"] == (2, 4) else [3, 2]
        expected = [body(transactional_batch(t)) for t in [1, *order]]
        assert log_bodies(partition.log) == expected
    finally:
        partition.close()


def test_a_transaction_two_callers_commit_at_once_is_copied_once(tmp_path: Path) -> None:
    partition = PartitionFixture(tmp_path)
    try:
        _journal(partition, 1, 2)
        waits, release = _blocked_first_copy(partition)
        results: dict[str, object] = {}
        first = _apply_in_thread(partition, 1, results, "first")
        _wait_until(lambda: bool(waits), "the first copy never reached its wait")
        # The same commit twice (a coordinator's retry beside its first try): both wait.
        again = [_apply_in_thread(partition, 2, results, key) for key in ("a", "b")]
        _wait_queued(partition, 2)
        release.set()
        for thread in (first, *again):
            thread.join(QUEUE_WAIT_S)
        assert results["a"] == results["b"] == (2, 4)
        expected = [body(transactional_batch(t)) for t in (1, 2)]
        assert log_bodies(partition.log) == expected
    finally:
        partition.close()


def test_one_callers_group_keeps_its_order_and_answers_each(tmp_path: Path) -> None:
    partition = PartitionFixture(tmp_path)
    try:
        _journal(partition, 5, 6, 7)
        partition.writer.apply_commit(6)  # applied already: answered in its place
        outcomes = partition.writer.apply_commits([CommitCall(7), CommitCall(6), CommitCall(5)])
        assert outcomes == [(2, 4), (0, 2), (4, 6)]
        expected = [body(transactional_batch(t)) for t in (6, 7, 5)]
        assert log_bodies(partition.log) == expected
    finally:
        partition.close()


def test_a_groups_applied_marks_go_in_the_next_groups_applying_write(tmp_path: Path) -> None:
    partition = PartitionFixture(tmp_path)
    try:
        _journal(partition, 1, 2, 3)
        writes: list[tuple[str, list[int], list[int]]] = []
        journal = partition.j
        then_applying, applied_all = journal.mark_applied_then_applying, journal.mark_applied_all

        def recorded_then_applying(name: str, applied: Any, applying: Any) -> Any:
            writes.append(("write", [t for t, *_ in applied], [t for t, *_ in applying]))
            return then_applying(name, applied, applying)

        def recorded_applied_all(name: str, applied: Any) -> Any:
            writes.append(("write", [t for t, *_ in applied], []))
            return applied_all(name, applied)

        journal.mark_applied_then_applying = recorded_then_applying  # type: ignore[method-assign]
        journal.mark_applied_all = recorded_applied_all  # type: ignore[method-assign]
        waits, release = _blocked_first_copy(partition)
        results: dict[str, object] = {}
        first = _apply_in_thread(partition, 1, results, "first")
        _wait_until(lambda: bool(waits), "the first copy never reached its wait")
        second = _apply_in_thread(partition, 2, results, "second")
        _wait_queued(partition, 1)
        third = _apply_in_thread(partition, 3, results, "third")
        _wait_queued(partition, 2)
        release.set()
        for thread in (first, second, third):
            thread.join(QUEUE_WAIT_S)
        # Three journal-log writes for two groups: the first group's APPLIED marks went
        # with the second group's APPLYING marks, the second's alone (nothing queued).
        assert writes == [
            ("write", [], [1]),
            ("write", [1], [2, 3]),
            ("write", [2, 3], []),
        ]
        assert (results["first"], results["second"], results["third"]) == ((0, 2), (2, 4), (4, 6))
        for transaction_id in (1, 2, 3):
            row = partition.j.transaction(partition.name, transaction_id)
            assert row is not None and row.state is CopyState.APPLIED
    finally:
        partition.close()
