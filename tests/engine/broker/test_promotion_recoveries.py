"""``PromotionRecoveries``: the broker's background round has each promoted leader recover
once through its barrier, asks again one still behind it, gives up on one that fails (its
next write recovers first), and forgets a closed one. The broker end to end:
``test_broker``'s restart without a write."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from twinlog.engine.base.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC
from twinlog.engine.broker.promotion_recoveries import PromotionRecoveries


class FakeLeader:
    def __init__(self, name: str, answers: list[bool | Exception]) -> None:
        self.name = name
        self.answers = answers
        self.asked = 0
        self.on_asked: PromotionRecoveries | None = None  # promoted again when asked

    def recover_after_promotion(self) -> bool:
        self.asked += 1
        if self.on_asked is not None:
            self.on_asked.promoted(self)
            self.on_asked = None
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_leader_behind_its_barrier_is_asked_again_until_it_recovers() -> None:
    recoveries = PromotionRecoveries()
    behind = FakeLeader("t-0", [False, False, True])
    through = FakeLeader("t-1", [True])
    recoveries.promoted(behind)
    recoveries.promoted(through)
    assert recoveries.run_due() == 1
    assert len(recoveries) == 1
    assert recoveries.run_due() == 0
    assert recoveries.run_due() == 1
    assert len(recoveries) == 0
    assert (behind.asked, through.asked) == (3, 1)
    assert recoveries.run_due() == 0  # nothing asked twice once done


def test_a_failed_recovery_is_left_to_the_next_write_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recoveries = PromotionRecoveries()
    failing = FakeLeader("t-0", [NotEnoughReplicasError("only [1] in sync")])
    recoveries.promoted(failing)
    with caplog.at_level(logging.INFO, logger="twinlog.engine.broker.promotion_recoveries"):
        assert recoveries.run_due() == 1
    assert len(recoveries) == 0
    assert "t-0: recovery after promotion failed (NotEnoughReplicasError" in caplog.text


def test_a_leader_promoted_again_while_it_recovers_stays_due() -> None:
    recoveries = PromotionRecoveries()
    leader = FakeLeader("t-0", [True, True])
    leader.on_asked = recoveries  # a newer term begins while the older one's recovery runs
    recoveries.promoted(leader)
    recoveries.run_due()
    assert len(recoveries) == 1
    recoveries.run_due()
    assert len(recoveries) == 0


def test_a_leader_that_stepped_down_meanwhile_is_done_without_a_failure_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recoveries = PromotionRecoveries()
    recoveries.promoted(FakeLeader("t-0", [NotLeaderOrFollowerError("t-0: follows now")]))
    with caplog.at_level(logging.INFO, logger="twinlog.engine.broker.promotion_recoveries"):
        assert recoveries.run_due() == 1
    assert len(recoveries) == 0
    assert "failed" not in caplog.text


def test_a_closed_partition_is_forgotten_and_a_stopping_broker_asks_no_more() -> None:
    recoveries = PromotionRecoveries()
    closed = FakeLeader("t-0", [False])
    recoveries.promoted(closed)
    recoveries.forget(closed)
    assert len(recoveries) == 0
    waiting = [FakeLeader(f"t-{n}", [True]) for n in range(3)]
    for leader in waiting:
        recoveries.promoted(leader)
    assert recoveries.run_due(should_stop=lambda: True) == 0
    assert [leader.asked for leader in waiting] == [0, 0, 0]
    assert len(recoveries) == 3


def test_a_broker_forgets_the_partitions_it_closes(tmp_path: Path) -> None:
    with Broker.open(tmp_path) as broker:
        broker.create_topic("orders", partitions=2)
        recoveries = broker.partition_manager.promotion_recoveries
        orders = broker.partition(TopicPartition("orders", 0))
        assert orders.promotion_recoveries is recoveries
        offsets = broker.partition(TopicPartition(OFFSETS_TOPIC, 0))
        assert offsets.promotion_recoveries is None  # its copies are folded by an APPLY
        recoveries.promoted(orders)  # as if still behind its barrier when deleted
        assert orders in recoveries
        broker.delete_topic("orders")
        assert orders.closed
        assert orders not in recoveries
        assert orders.recover_after_promotion()  # asked anyway: done, nothing touched
