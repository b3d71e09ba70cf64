"""A cluster broker asks a producer id's coordinator elsewhere for its transactional id
(``Broker.transactional_id_of``, the ACL check of every batch): a known answer is kept for
good (an id's transactional id never changes), an unknown one for a few seconds (made-up
ids must not each cost a call to another broker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import twinlog.engine.broker.coordinator_manager as coordinator_manager_module
from twinlog.engine.broker.broker import Broker
from twinlog.engine.transactions.partition_calls import (
    IssuedProducer,
    LookupProducer,
    RegisterPartition,
    SettleOffsetsHolder,
)


class CountingCoordinators:
    """The coordinators elsewhere: producer 1 was issued for 'loader', nothing else."""

    def __init__(self) -> None:
        self.lookups: list[int] = []

    def register_partition(self, request: RegisterPartition) -> None:
        raise AssertionError("not called here")

    def settle_offsets_holder(self, request: SettleOffsetsHolder) -> None:
        raise AssertionError("not called here")

    def lookup_producer(self, request: LookupProducer) -> IssuedProducer:
        self.lookups.append(request.producer_id)
        return IssuedProducer("loader" if request.producer_id == 1 else None)


@pytest.fixture()
def broker(tmp_path: Path) -> Iterator[Broker]:
    opened = Broker.open(tmp_path / "broker", broker_id=1)
    yield opened
    opened.close()


def test_a_known_answer_is_asked_once(broker: Broker) -> None:
    elsewhere = CountingCoordinators()
    broker.transaction_coordinators = elsewhere
    assert [broker.transactional_id_of(1) for _ in range(5)] == ["loader"] * 5
    assert elsewhere.lookups == [1]


def test_an_unknown_id_is_asked_again_only_after_a_few_seconds(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(coordinator_manager_module.time, "monotonic", lambda: now[0])
    elsewhere = CountingCoordinators()
    broker.transaction_coordinators = elsewhere
    made_up = 7 << 8  # coordinator 0's, never issued
    assert [broker.transactional_id_of(made_up) for _ in range(50)] == [None] * 50
    assert elsewhere.lookups == [made_up]
    now[0] += coordinator_manager_module.UNKNOWN_ID_KEPT_S + 0.1
    assert broker.transactional_id_of(made_up) is None
    assert elsewhere.lookups == [made_up, made_up]
