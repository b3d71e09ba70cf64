"""The completion pipeline: several transactions of one coordinator complete at once, one
FIFO lane per partition keeps the copies on a partition in commit order, a producer's
transactions complete in order, a failed one is retried while the others go on, and
abandon() journals nothing more."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from completion_support import prepared_commit

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.transactions import coordinator_completion
from twinlog.engine.transactions.coordinator_completion import CompletionHook, CompletionWorker
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CallEpochs,
    CountEntries,
    EntryCount,
)
from twinlog.engine.transactions.transaction_metadata import TransactionMetadata
from twinlog.journal.txn_records import Committed, CoordinatorRecord

P, Q, R = (TopicPartition("t", number) for number in range(3))
WAIT_S = 5  # the bound on every wait for something that must happen
NOT_EXPECTED_S = 0.2  # how long a test watches for something that must not happen

Key = tuple[int, TopicPartition | None]  # (transaction id, partition: None for its journal write)


class ScriptedLeaders:
    """Partition leaders whose APPLY of a transaction on a partition can be held until
    released, or fail (retriable) until released; every call's start and end, and every
    journal write, is logged in one order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, Key]] = []  # ("start" | "end" | "journal", key)
        self.started: dict[Key, threading.Event] = {}
        self.held: dict[Key, threading.Event] = {}  # set: released
        self.failing: dict[Key, threading.Event] = {}  # set: no longer failing

    def hold(self, transaction_id: int, partition: TopicPartition) -> threading.Event:
        release = self.held[transaction_id, partition] = threading.Event()
        return release

    def fail(self, transaction_id: int, partition: TopicPartition) -> threading.Event:
        recover = self.failing[transaction_id, partition] = threading.Event()
        return recover

    def started_event(self, transaction_id: int, partition: TopicPartition) -> threading.Event:
        """Set once the APPLY of ``transaction_id`` on ``partition`` started."""
        with self.lock:
            return self.started.setdefault((transaction_id, partition), threading.Event())

    def note(self, what: str, key: Key) -> None:
        with self.lock:
            self.log.append((what, key))

    def position(self, what: str, key: Key, last: bool = False) -> int:
        """Where ``what`` of ``key`` is in the log (its first, or last, occurrence)."""
        with self.lock:
            found = [index for index, entry in enumerate(self.log) if entry == (what, key)]
        assert found, f"no {what} of {key}"
        return found[-1] if last else found[0]

    def count(self, what: str, key: Key) -> int:
        with self.lock:
            return self.log.count((what, key))

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        return 1

    def count_entries(self, request: CountEntries) -> EntryCount:
        return EntryCount(1)

    def apply_commit(self, request: ApplyCommit) -> None:
        key = (request.transaction_id, request.topic_partition)
        self.note("start", key)
        self.started_event(*key).set()
        release = self.held.get(key)
        if release is not None:
            assert release.wait(WAIT_S), f"{key} held too long"
        recovered = self.failing.get(key)
        self.note("end", key)
        if recovered is not None and not recovered.is_set():
            raise NotLeaderOrFollowerError(f"{request.topic_partition}: no live leader is known")

    def apply_abort(self, request: ApplyAbort) -> None:
        raise AssertionError("a committed transaction is never aborted")


class Pipeline:
    """A started CompletionWorker over ``ScriptedLeaders``; its journal write marks the
    transaction COMMITTED and is logged."""

    def __init__(
        self,
        leaders: ScriptedLeaders,
        transactions: list[TransactionMetadata],
        on_complete: CompletionHook | None = None,
    ) -> None:
        self.leaders = leaders
        self.transactions = {txn.transaction_id: txn for txn in transactions}
        self.journaled = threading.Event()  # something was journaled
        self.worker = CompletionWorker(
            0,
            threading.RLock(),
            self.transactions.get,
            self._write,
            leaders,
            lambda _tp: CallEpochs(0, 1, 1),
            on_complete,
        )
        self.worker.start()
        for txn in transactions:
            self.worker.queue(txn.transaction_id)

    def _write(self, record: CoordinatorRecord) -> int:
        assert isinstance(record, Committed)
        txn = self.transactions[record.transaction_id]
        assert txn.state is TransactionState.PREPARE_COMMIT, "journaled complete twice"
        txn.state = TransactionState.COMMITTED
        self.leaders.note("journal", (record.transaction_id, None))
        self.journaled.set()
        return 0

    def complete(self, transaction_id: int) -> bool:
        """Whether ``transaction_id`` is journaled complete within WAIT_S."""
        return self.worker.wait_complete(self.transactions[transaction_id], WAIT_S)

    def state(self, transaction_id: int) -> TransactionState:
        return self.transactions[transaction_id].state


@pytest.fixture
def leaders() -> Iterator[ScriptedLeaders]:
    scripted = ScriptedLeaders()
    yield scripted
    for release in [*scripted.held.values(), *scripted.failing.values()]:
        release.set()  # nothing left waiting when a test failed halfway


def test_transactions_on_disjoint_partitions_complete_at_once(leaders: ScriptedLeaders) -> None:
    """A serial worker would leave the second waiting behind the first's held APPLY."""
    release = leaders.hold(1, P)
    pipeline = Pipeline(leaders, [prepared_commit([P], 1, 1), prepared_commit([Q], 2, 2)])
    try:
        assert leaders.started_event(1, P).wait(WAIT_S)
        assert pipeline.complete(2)  # while the first is still applying
        assert pipeline.state(1) is TransactionState.PREPARE_COMMIT
        release.set()
        assert pipeline.complete(1)
    finally:
        pipeline.worker.close()


def test_per_partition_a_later_apply_starts_only_after_the_earlier_returned(
    leaders: ScriptedLeaders,
) -> None:
    """T2's APPLY on P waits in P's lane behind T1's slow one, though T2 applies on R at
    once; T3, on Q alone, passes both."""
    release = leaders.hold(1, P)
    pipeline = Pipeline(
        leaders,
        [prepared_commit([P], 1, 1), prepared_commit([P, R], 2, 2), prepared_commit([Q], 3, 3)],
    )
    try:
        assert leaders.started_event(2, R).wait(WAIT_S)  # T2 is dispatched...
        assert pipeline.complete(3)
        assert not leaders.started_event(2, P).wait(NOT_EXPECTED_S)  # ...but waits on P
        release.set()
        assert pipeline.complete(1) and pipeline.complete(2)
    finally:
        pipeline.worker.close()
    assert leaders.position("end", (1, P)) < leaders.position("start", (2, P))
    assert leaders.position("journal", (3, None)) < leaders.position("end", (1, P))


def test_a_producers_transaction_waits_while_its_earlier_one_is_in_flight(
    leaders: ScriptedLeaders,
) -> None:
    """T1 and T2 of one producer, on different partitions: no lane orders them, the
    producer rule does. Another producer's T3 goes ahead meanwhile."""
    release = leaders.hold(1, P)
    pipeline = Pipeline(
        leaders,
        [prepared_commit([P], 1, 1), prepared_commit([Q], 2, 1), prepared_commit([R], 3, 2)],
    )
    try:
        assert leaders.started_event(1, P).wait(WAIT_S)
        assert pipeline.complete(3)
        assert not leaders.started_event(2, Q).wait(NOT_EXPECTED_S)
        release.set()
        assert pipeline.complete(2)
    finally:
        pipeline.worker.close()
    assert leaders.position("journal", (1, None)) < leaders.position("start", (2, Q))


def test_a_producers_transaction_waits_while_its_earlier_one_waits_for_a_retry(
    leaders: ScriptedLeaders, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T1 fails on P and waits (a retry delay made long enough to look at); T2 of the same
    producer is not dispatched until T1 is journaled, while another producer's T3 is."""
    monkeypatch.setattr(coordinator_completion, "RETRIABLE_BACKOFF", Backoff(300, 300, jitter=0))
    recover = leaders.fail(1, P)
    pipeline = Pipeline(
        leaders,
        [prepared_commit([P], 1, 1), prepared_commit([Q], 2, 1), prepared_commit([R], 3, 2)],
    )
    try:
        assert leaders.started_event(1, P).wait(WAIT_S)
        assert pipeline.complete(3)
        assert not leaders.started_event(2, Q).wait(NOT_EXPECTED_S)  # T1 waits for its retry
        recover.set()
        assert pipeline.complete(2)
    finally:
        pipeline.worker.close()
    assert leaders.count("start", (1, P)) >= 2
    assert leaders.position("journal", (1, None)) < leaders.position("start", (2, Q))


def test_a_failed_transaction_is_retried_on_every_partition_and_journaled_once(
    leaders: ScriptedLeaders,
) -> None:
    """T1 fails on Q until released: it is not journaled, T2 (behind it on P) and T3 complete
    meanwhile, and once Q is back T1 is applied again everywhere and journaled once."""
    recover = leaders.fail(1, Q)
    pipeline = Pipeline(
        leaders,
        [prepared_commit([P, Q], 1, 1), prepared_commit([P], 2, 2), prepared_commit([R], 3, 3)],
    )
    try:
        assert pipeline.complete(2) and pipeline.complete(3)
        assert pipeline.state(1) is TransactionState.PREPARE_COMMIT
        assert leaders.count("start", (1, Q)) >= 1
        recover.set()
        assert pipeline.complete(1)
    finally:
        pipeline.worker.close()
    assert leaders.count("journal", (1, None)) == 1
    tries = leaders.count("start", (1, P))
    assert tries >= 2 and leaders.count("start", (1, Q)) == tries  # every try, everywhere
    assert leaders.position("end", (1, Q), last=True) < leaders.position("journal", (1, None))


def test_at_most_the_bound_of_transactions_is_in_flight(
    leaders: ScriptedLeaders, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(coordinator_completion, "COMPLETIONS_IN_FLIGHT_MAX", 2)
    first, second = leaders.hold(1, P), leaders.hold(2, Q)
    pipeline = Pipeline(
        leaders,
        [prepared_commit([P], 1, 1), prepared_commit([Q], 2, 2), prepared_commit([R], 3, 3)],
    )
    try:
        assert leaders.started_event(1, P).wait(WAIT_S)
        assert leaders.started_event(2, Q).wait(WAIT_S)
        assert not leaders.started_event(3, R).wait(NOT_EXPECTED_S)
        second.set()  # one finishes: the third takes its place
        assert pipeline.complete(3)
        first.set()
        assert pipeline.complete(1)
    finally:
        pipeline.worker.close()


def test_abandon_while_lanes_hold_work_journals_nothing_more(leaders: ScriptedLeaders) -> None:
    """T1 and T3 are applying, T2 waits in P's lane: after abandon() the running APPLYs
    return, but nothing is journaled and the lane takes no new item."""
    on_p, on_q = leaders.hold(1, P), leaders.hold(3, Q)
    pipeline = Pipeline(
        leaders,
        [prepared_commit([P], 1, 1), prepared_commit([P], 2, 2), prepared_commit([Q], 3, 3)],
    )
    assert leaders.started_event(1, P).wait(WAIT_S)
    assert leaders.started_event(3, Q).wait(WAIT_S)
    pipeline.worker.abandon()
    on_p.set()
    on_q.set()
    assert not pipeline.journaled.wait(NOT_EXPECTED_S)
    assert not leaders.started_event(2, P).wait(NOT_EXPECTED_S)
    assert {pipeline.state(t) for t in (1, 2, 3)} == {TransactionState.PREPARE_COMMIT}


def test_abandon_while_a_completion_is_being_journaled_journals_nothing(
    leaders: ScriptedLeaders,
) -> None:
    """The worker has every APPLY of T1 back and is about to journal it (in the completion
    hook) when abandon() comes: COMMITTED is not written."""
    in_hook, abandoned = threading.Event(), threading.Event()

    def on_complete(txn: TransactionMetadata) -> None:
        in_hook.set()
        assert abandoned.wait(WAIT_S)

    pipeline = Pipeline(leaders, [prepared_commit([P], 1, 1)], on_complete)
    assert in_hook.wait(WAIT_S)
    pipeline.worker.abandon()
    abandoned.set()
    assert not pipeline.journaled.wait(NOT_EXPECTED_S)
    assert pipeline.state(1) is TransactionState.PREPARE_COMMIT


def test_close_journals_what_its_running_applies_complete_and_starts_nothing_new(
    leaders: ScriptedLeaders,
) -> None:
    """close() lets T1's APPLY in progress finish and journals T1; T2, behind it in P's
    lane, is left to recovery."""
    release = leaders.hold(1, P)
    pipeline = Pipeline(leaders, [prepared_commit([P], 1, 1), prepared_commit([P], 2, 2)])
    assert leaders.started_event(1, P).wait(WAIT_S)
    threading.Timer(0.05, release.set).start()  # while close() waits
    pipeline.worker.close()
    assert pipeline.state(1) is TransactionState.COMMITTED
    assert pipeline.state(2) is TransactionState.PREPARE_COMMIT
    assert leaders.count("start", (2, P)) == 0
