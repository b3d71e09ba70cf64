"""The producer's transaction phases: the table of transitions, walked pair by pair."""

from __future__ import annotations

import itertools
from collections import deque

import pytest

from twinlog.engine.base.errors import (
    AuthenticationError,
    InvalidTxnStateError,
    ProducerFencedError,
    RequestTimedOutError,
    TransactionDataMissingError,
    TwinlogError,
    UnknownProducerIdError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.records.batch_format import NO_TRANSACTION_ID
from twinlog.rpc.client.transaction_manager import (
    FAILED_PHASES,
    VALID_TRANSITIONS,
    TransactionManager,
    TxnPhase,
    is_transition_valid,
)

IDENTITY = ProducerIdentity(7, 0)
ALL_PAIRS = list(itertools.product(TxnPhase, TxnPhase))
U, R, T, A, F = (
    TxnPhase.UNINITIALISED,
    TxnPhase.READY,
    TxnPhase.IN_TRANSACTION,
    TxnPhase.ABORTABLE,
    TxnPhase.FATAL,
)
# Written out again here, so that a change to the producer's table is a decision.
LISTED = {
    (U, R),  # init_transactions()
    (R, R),  # init_transactions() again
    (R, T),  # begin_transaction()
    (R, F),  # fenced
    (T, R),  # commit, abort, or init_transactions() again
    (T, A),  # a send failed
    (T, F),  # fenced
    (A, R),  # abort, or init_transactions() again
    (A, F),  # fenced
    (F, R),  # init_transactions() again: a new generation
    (F, F),  # fenced again
}


def _failure_for(target: TxnPhase) -> TwinlogError | None:
    if target is TxnPhase.FATAL:
        return ProducerFencedError(f"fenced on the way to {target.value}")
    if target is TxnPhase.ABORTABLE:
        return TwinlogError(f"a send failed on the way to {target.value}")
    return None


def _path_to(phase: TxnPhase) -> list[TxnPhase]:
    """The shortest walk through the table from UNINITIALISED to ``phase``."""
    paths = {TxnPhase.UNINITIALISED: [TxnPhase.UNINITIALISED]}
    waiting = deque([TxnPhase.UNINITIALISED])
    while waiting:
        source = waiting.popleft()
        for target in sorted(VALID_TRANSITIONS[source], key=lambda each: each.value):
            if target not in paths:
                paths[target] = [*paths[source], target]
                waiting.append(target)
    assert phase in paths, f"{phase.value} cannot be reached from uninitialised"
    return paths[phase]


def _manager_in(phase: TxnPhase) -> TransactionManager:
    """A transactional producer's manager brought to ``phase`` by transitions only."""
    manager = TransactionManager("table")
    for step in _path_to(phase)[1:]:
        manager.transition_to(step, _failure_for(step))
    assert manager.phase is phase
    return manager


def test_the_table_is_the_one_written_here() -> None:
    assert set(VALID_TRANSITIONS) == set(TxnPhase)
    table = {
        (source, target) for source, targets in VALID_TRANSITIONS.items() for target in targets
    }
    assert table == LISTED


@pytest.mark.parametrize("phase", list(TxnPhase), ids=lambda phase: phase.name)
def test_every_phase_is_reachable_from_the_start(phase: TxnPhase) -> None:
    assert _manager_in(phase).phase is phase


@pytest.mark.parametrize(
    ("source", "target"), ALL_PAIRS, ids=[f"{s.name}->{t.name}" for s, t in ALL_PAIRS]
)
def test_listed_transitions_are_accepted_and_all_others_refused(
    source: TxnPhase, target: TxnPhase
) -> None:
    manager = _manager_in(source)
    failure = _failure_for(target)
    assert is_transition_valid(source, target) is ((source, target) in LISTED)
    if (source, target) in LISTED:
        manager.transition_to(target, failure)
        assert manager.phase is target
        assert manager.failure is failure
        return
    before = manager.failure
    expected: type[TwinlogError] = (
        ProducerFencedError if source is TxnPhase.FATAL else InvalidTxnStateError
    )
    with pytest.raises(expected) as refused:
        manager.transition_to(target, failure)
    if source is TxnPhase.FATAL:
        assert refused.value is before  # fenced: every later call raises that error
    assert (manager.phase, manager.failure) == (source, before)  # nothing changed


def test_the_refusals_say_what_to_do() -> None:
    fresh = TransactionManager("hints")
    with pytest.raises(InvalidTxnStateError, match=r"call init_transactions\(\) before begin"):
        fresh.require_transition(TxnPhase.IN_TRANSACTION, "begin_transaction()")
    fresh.initialised(IDENTITY)
    fresh.began(41)
    with pytest.raises(
        InvalidTxnStateError, match="in transaction: commit or abort transaction 41"
    ):
        fresh.require_transition(TxnPhase.IN_TRANSACTION, "begin_transaction()")


def test_a_failed_phase_keeps_its_error_and_only_those_have_one() -> None:
    manager = _manager_in(TxnPhase.IN_TRANSACTION)
    with pytest.raises(ValueError, match="needs its error"):
        manager.transition_to(TxnPhase.ABORTABLE)
    with pytest.raises(ValueError, match="only it"):
        manager.transition_to(TxnPhase.READY, TwinlogError("stray"))
    assert manager.phase is TxnPhase.IN_TRANSACTION
    for phase in FAILED_PHASES:
        assert _manager_in(phase).failure is not None


def test_a_send_failure_makes_only_an_open_transaction_abortable() -> None:
    manager = _manager_in(TxnPhase.IN_TRANSACTION)
    failure = TwinlogError("refused")
    manager.send_failed(failure)
    assert (manager.phase, manager.failure) == (TxnPhase.ABORTABLE, failure)
    with pytest.raises(TwinlogError) as raised:
        manager.require_can_send()
    assert raised.value is failure
    assert manager.needs_abort() and manager.has_open_transaction()
    manager.ended()
    assert (manager.phase, manager.failure) == (TxnPhase.READY, None)
    assert manager.transaction_id == NO_TRANSACTION_ID
    manager.send_failed(TwinlogError("an answer after the abort"))
    assert manager.phase is TxnPhase.READY


def test_an_idempotent_producer_is_ready_until_fenced() -> None:
    manager = TransactionManager(None)
    assert manager.phase is TxnPhase.READY
    assert manager.require_can_send() == NO_TRANSACTION_ID
    with pytest.raises(InvalidTxnStateError, match="transactional_id= to Producer"):
        manager.require_transactional("begin_transaction()")
    fenced = ProducerFencedError("a newer producer")
    manager.fenced(fenced)
    assert not manager.can_retry_sends()
    with pytest.raises(ProducerFencedError) as raised:
        manager.require_can_send()
    assert raised.value is fenced


def test_a_refusal_of_a_call_out_of_order_is_neither_abortable_nor_fatal() -> None:
    manager = _manager_in(TxnPhase.IN_TRANSACTION)
    with pytest.raises(InvalidTxnStateError) as raised:
        manager.require_transition(TxnPhase.IN_TRANSACTION, "begin_transaction()")
    assert not (raised.value.retriable or raised.value.abortable or raised.value.fatal)
    assert InvalidTxnStateError.abortable  # the server's, about a transaction, is
    with pytest.raises(InvalidTxnStateError) as before_init:
        TransactionManager("fresh").require_can_send()
    assert not before_init.value.abortable
    assert manager.phase is TxnPhase.IN_TRANSACTION


def test_a_failed_send_of_a_transaction_is_abortable_whatever_its_class() -> None:
    manager = _manager_in(TxnPhase.IN_TRANSACTION)
    timed_out = RequestTimedOutError("delivery_timeout_ms passed")
    manager.send_failed(timed_out)
    assert manager.phase is TxnPhase.ABORTABLE
    assert timed_out.abortable and not timed_out.retriable and not timed_out.fatal
    assert RequestTimedOutError.retriable  # the class is unchanged


def test_a_fatal_send_failure_ends_the_generation() -> None:
    manager = _manager_in(TxnPhase.IN_TRANSACTION)
    unknown = UnknownProducerIdError("the coordinator forgot this producer")
    manager.send_failed(unknown)
    assert (manager.phase, manager.failure) == (TxnPhase.FATAL, unknown)
    assert unknown.fatal and not unknown.abortable


@pytest.mark.parametrize(
    ("error", "phase"),
    [
        (ProducerFencedError("newer generation"), TxnPhase.FATAL),
        (AuthenticationError("token revoked"), TxnPhase.FATAL),
        (TransactionDataMissingError("nothing journaled"), TxnPhase.ABORTABLE),
        (InvalidTxnStateError("aborted by its timeout"), TxnPhase.ABORTABLE),
        (RequestTimedOutError("commit outcome unknown"), TxnPhase.IN_TRANSACTION),
        (UnknownTransactionError("never begun"), TxnPhase.IN_TRANSACTION),
    ],
    ids=lambda each: type(each).__name__ if isinstance(each, Exception) else each.name,
)
def test_a_failed_transaction_call_moves_the_phase_by_its_flags(
    error: TwinlogError, phase: TxnPhase
) -> None:
    manager = _manager_in(TxnPhase.IN_TRANSACTION)
    manager.call_failed(error)
    assert manager.phase is phase
    assert manager.needs_abort() is (phase is TxnPhase.ABORTABLE)
    ready = _manager_in(TxnPhase.READY)
    ready.call_failed(error)  # no open transaction: only a fatal error changes anything
    assert ready.phase is (TxnPhase.FATAL if error.fatal else TxnPhase.READY)
