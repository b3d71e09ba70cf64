"""What produce counts and says: delivered, not delivered (first lines), unconfirmed."""

from __future__ import annotations

from twinlog.engine.base.errors import RequestTimedOutError, UnknownTopicOrPartitionError
from twinlog.rpc.cli.delivery_report import DeliveryTracker
from twinlog.rpc.client.futures import BatchResult, RecordFuture


def futures(count: int) -> tuple[BatchResult, list[RecordFuture]]:
    batch = BatchResult("t", 0, transactional=False)
    return batch, [RecordFuture(batch, delta, 0) for delta in range(count)]


def test_acknowledged_records_are_delivered() -> None:
    tracker = DeliveryTracker(transactional=False)
    batch, records = futures(3)
    for line, record in enumerate(records, start=1):
        tracker.track(record, line)
    assert tracker.counts_text() == "0 records delivered, 0 not delivered, 3 unconfirmed"
    assert not tracker.wait_for_answers(timeout_s=0.01)
    batch.set_result(10)
    assert tracker.wait_for_answers(timeout_s=1)
    assert tracker.delivered == 3 and tracker.failure_line() is None


def test_failed_and_unanswered_records_name_their_first_lines() -> None:
    tracker = DeliveryTracker(transactional=False)
    failed, first = futures(6)
    _, never = futures(2)
    for line, record in zip([3, 7, 12, 13, 14, 15], first, strict=True):
        tracker.track(record, line)
    tracker.track(never[0], 20)
    tracker.track(never[1], 21)
    failed.set_exception(UnknownTopicOrPartitionError("no partition 7"))
    assert not tracker.wait_for_answers(timeout_s=0.01)
    tracker.give_up_pending(RequestTimedOutError("no answer"))
    assert tracker.counts_text() == "0 records delivered, 8 not delivered"
    assert tracker.failure_line() == (
        "8 records not delivered (first failing lines: 3, 7, 12, 13, 14): "
        "UnknownTopicOrPartitionError: no partition 7"
    )


def test_a_transactions_records_count_when_it_commits_or_aborts() -> None:
    tracker = DeliveryTracker(transactional=True)
    batch, records = futures(4)
    for line, record in enumerate(records[:2], start=1):
        tracker.track(record, line)
    batch.set_result(0)
    assert tracker.delivered == 0  # acknowledged is not committed
    tracker.transaction_committed()
    assert tracker.delivered == 2
    for line, record in enumerate(records[2:], start=3):
        tracker.track(record, line)
    assert tracker.counts_text() == "2 records delivered, 0 not delivered, 2 unconfirmed"
    assert tracker.transaction_aborted(RequestTimedOutError("commit timed out")) == 2
    assert tracker.failure_line() == (
        "2 records not delivered (first failing lines: 3, 4): "
        "RequestTimedOutError: commit timed out"
    )
