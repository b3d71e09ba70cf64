"""The fault harness (tests/system/fault_harness.py): its checker on hand-made histories, and one CI run.

The CI run SIGKILLs a real ``twinlog serve`` at least 30 times (every named
failpoint at least once, plus random kills) under transactional and plain
producers, with tokens and ACLs on and an attacker principal trying, across the
kills, to reach the victims' group and producer ids (each attempt must be refused),
then reads every partition back and checks what the clients were told. The long mode
is run by hand:

    .venv/bin/python tests/system/fault_harness.py --minutes 30
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fault_harness import (
    ABORTED,
    COMMITTED,
    OPEN,
    UNKNOWN,
    HarnessConfig,
    PlainWrite,
    Transaction,
    check,
    failpoint_names,
    format_summary,
    run,
    said_aborted,
)
from harness_security import ATTACKS, AttackTally

from twinlog.engine.base.errors import InvalidTxnStateError
from twinlog.engine.base.types import TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch
from twinlog.engine.transactions.txn_state import TransactionEvent, next_state


def txn(name: str, outcome: str, values: dict[int, list[bytes]], reason: str = "") -> Transaction:
    producer, number = name.split("/")
    return Transaction(producer, int(number), values, outcome, reason)


def as_log(*values: bytes, offsets: list[int] | None = None) -> list[tuple[int, bytes | None]]:
    return list(zip(offsets or range(len(values)), values, strict=True))


def counts(report) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {kind: len(found) for kind, found in report.anomalies.items() if found}


# --- the checker --------------------------------------------------------------------------


def test_checker_accepts_a_clean_history() -> None:
    history = [
        txn("p0/1", COMMITTED, {0: [b"a1", b"a2"], 1: [b"a3"]}),
        txn("p0/2", ABORTED, {0: [b"b1"]}, "abort"),
        txn("p1/1", UNKNOWN, {1: [b"c1", b"c2"]}, "BrokerUnavailableError"),  # present whole
        txn("p1/2", UNKNOWN, {0: [b"d1"]}, "BrokerUnavailableError"),  # absent
        txn("p1/3", OPEN, {1: [b"e1"]}),
    ]
    plain = [PlainWrite(b"x1", 0, True), PlainWrite(b"x2", 1, False)]
    logs = {0: as_log(b"a1", b"a2", b"x1"), 1: as_log(b"c1", b"c2", b"a3")}
    report = check(history, plain, logs)
    assert report.total == 0, report.anomalies
    assert report.records_checked == 6
    assert (report.unknown_present, report.unknown_absent) == (1, 1)


def test_checker_reports_every_anomaly_class() -> None:
    history = [
        # lost write: acknowledged, one of its values missing
        txn("p0/1", COMMITTED, {0: [b"lost-1", b"lost-2"]}),
        # aborted read: aborted, yet present; and a never-committed one present
        txn("p0/2", ABORTED, {1: [b"aborted-1"]}, "abort"),
        txn("p0/3", OPEN, {1: [b"open-1"]}),
        # duplicate: a committed value present twice
        txn("p0/4", COMMITTED, {2: [b"dup-1"]}),
        # torn transaction: a plain record inside it; and one out of send order
        txn("p1/1", COMMITTED, {0: [b"torn-1", b"torn-2"]}),
        txn("p1/2", COMMITTED, {2: [b"order-1", b"order-2"]}),
        # not atomic: unknown outcome, partly present
        txn("p1/3", UNKNOWN, {0: [b"half-1"], 2: [b"half-2"]}, "BrokerUnavailableError"),
    ]
    plain = [
        PlainWrite(b"plain-inside", 0, True),
        PlainWrite(b"plain-lost", 1, True),  # lost write of a plain record
        PlainWrite(b"plain-unknown", 1, False),  # not acknowledged: may be absent
    ]
    logs = {
        0: as_log(b"lost-1", b"torn-1", b"plain-inside", b"torn-2", b"half-1"),
        # non-dense offsets: 0, 1, 3; foreign value: never sent
        1: as_log(b"aborted-1", b"open-1", b"never-sent", offsets=[0, 1, 3]),
        2: as_log(b"dup-1", b"order-2", b"order-1", b"dup-1"),
    }
    report = check(history, plain, logs)
    assert counts(report) == {
        "lost write": 2,
        "aborted read": 2,
        "duplicate": 1,
        "torn transaction": 2,
        "not atomic": 1,
        "non-dense offsets": 1,
        "foreign value": 1,
    }, report.anomalies
    messages = "\n".join(m for found in report.anomalies.values() for m in found)
    for name in ("p0/t1", "p0/t2", "p0/t3", "p1/t1", "p1/t2", "p1/t3", "plain-lost", "never-sent"):
        assert name in messages


def test_checker_reports_accepted_attacks_and_a_wrong_group_offset() -> None:
    history = [
        txn("p0/1", COMMITTED, {0: [b"a1"]}),
        txn("p0/2", COMMITTED, {0: [b"b1"]}),
        txn("p0/3", ABORTED, {0: [b"c1"]}, "abort"),
        txn("p0/4", UNKNOWN, {0: [b"d1"]}, "BrokerUnavailableError"),  # absent: aborted
    ]
    for number, item in enumerate(history, 1):
        item.group_offset = number
    logs = {0: as_log(b"a1", b"b1")}
    breach = "commit the victims' group offsets: overwrote group 'victims''s offset with 0"
    assert check(history, [], logs, group_offset=2).total == 0
    assert counts(check(history, [], logs, group_offset=2, breaches=[breach])) == {
        "isolation breach": 1
    }
    assert counts(check(history, [], logs, group_offset=1)) == {"lost write": 1}
    assert counts(check(history, [], logs, group_offset=-1)) == {"lost write": 1}
    assert counts(check(history, [], logs, group_offset=0)) == {"foreign value": 1}
    assert counts(check(history, [], logs, group_offset=3)) == {"aborted read": 1}
    assert counts(check(history, [], logs, group_offset=4)) == {"aborted read": 1}


def test_checker_reports_a_log_that_does_not_start_at_zero_and_a_misplaced_value() -> None:
    history = [txn("p0/1", COMMITTED, {0: [b"v1"]})]
    report = check(history, [], {0: as_log(), 1: as_log(b"v1")}, {0: 5, 1: 0})
    assert counts(report) == {"lost write": 1, "non-dense offsets": 1, "foreign value": 1}


def test_an_aborted_answer_is_recognised_from_the_state_table() -> None:
    """The harness reads 'aborted' from the server's InvalidTxnStateError text: keep in step."""
    for state in (TransactionState.ABORTED, TransactionState.PREPARE_ABORT):
        with pytest.raises(InvalidTxnStateError) as caught:
            next_state(7, state, TransactionEvent.COMMIT)
        assert said_aborted(caught.value)
    with pytest.raises(InvalidTxnStateError) as caught:
        next_state(7, TransactionState.COMMITTED, TransactionEvent.ABORT)
    assert not said_aborted(caught.value)


def test_every_failpoint_is_found() -> None:
    names = failpoint_names()
    assert {"coordinator.after_prepare", "copier.after_batch", "journal.before_sync"} <= set(names)
    assert len(names) >= 10


# --- the CI run ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.crash
def test_fault_harness_ci_run(tmp_path: Path) -> None:
    config = HarnessConfig(work_dir=tmp_path / "harness", seed=20261122, kills=30, max_seconds=240)
    result = run(config)
    summary = format_summary(result)
    print(summary)
    assert result.report.total == 0, summary
    assert not result.worker_errors, summary
    assert result.kill_count >= 30, summary
    assert result.failpoints_reached == set(result.failpoints), summary
    assert result.kills["random"] >= 5, summary
    assert result.outcome_count(COMMITTED) >= 50, summary
    assert result.outcome_count(ABORTED) >= 5, summary
    assert result.report.records_checked > 0, summary
    # Every kind of outcome the checker judges was produced, so each check ran on real data:
    # Commits whose answer was lost (a hasty deadline, or a kill during a one-shot call) were
    # resolved by reading: whole or absent (a part is the "not atomic" anomaly, counted above).
    assert result.outcome_count(UNKNOWN) >= 1, summary
    reasons = {txn.reason for txn in result.transactions if txn.outcome == ABORTED}
    assert {"abort", "fenced", "timed out"} <= reasons, summary
    assert sum(write.acknowledged for write in result.plain) > 0, summary
    # The attacker (another principal) tried every attack across the kills; none got
    # through (an accepted one is an "isolation breach", counted in the total above).
    attacks = result.attacks
    assert isinstance(attacks, AttackTally), summary
    assert not attacks.accepted, summary
    for attack in ATTACKS:
        assert attacks.refused[attack] >= 1, f"{attack}: never answered\n{summary}"
    assert any(txn.group_offset is not None for txn in result.transactions), summary


# --- found by the harness: a retried commit after restarts must learn the outcome --------


def _wait_idle(broker: Broker) -> None:
    deadline = time.monotonic() + 10
    while broker.list_transactions():
        assert time.monotonic() < deadline, broker.list_transactions()
        time.sleep(0.01)


def test_a_retried_end_learns_the_outcome_after_a_checkpoint_and_a_restart(
    tmp_path: Path,
) -> None:
    """The client's first CommitTransaction made PREPARE_COMMIT durable but its answer was lost
    (the server died); the retry reaches a broker restarted after a checkpoint that passed the
    transaction. It must answer as for any retried end (success for a commit, the abort for an
    abort), not UnknownTransactionError ("never begun ... begin a new transaction"), which
    would make an application write the committed records a second time."""
    with Broker.open(tmp_path) as broker:
        broker.create_topic("t", partitions=1)
        committer = broker.init_producer("committer")
        aborter = broker.init_producer("aborter")
        ends = []
        for identity, end in ((committer, broker.commit_transaction), (aborter, None)):
            txn_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
            batch = build_batch(
                [b"v"],
                producer_id=identity.producer_id,
                producer_generation=identity.producer_generation,
                base_sequence=0,
                transactional=True,
            )
            broker.produce("t", 0, batch, transaction_id=txn_id)
            if end is None:
                broker.abort_transaction(txn_id, identity.producer_id, identity.producer_generation)
            else:
                end(txn_id, identity.producer_id, identity.producer_generation)
            ends.append((identity, txn_id))
        _wait_idle(broker)
        for coordinator in broker.coordinators:
            coordinator.checkpoint()  # passes both: nothing is in flight
    with Broker.open(tmp_path) as broker:
        (committer, committed), (aborter, aborted) = ends
        broker.commit_transaction(committed, committer.producer_id, committer.producer_generation)
        broker.abort_transaction(aborted, aborter.producer_id, aborter.producer_generation)
        with pytest.raises(InvalidTxnStateError, match="it is ABORTED"):
            broker.commit_transaction(aborted, aborter.producer_id, aborter.producer_generation)
        assert broker.list_offset("t", 0, "latest") == 1
