"""From the start of a controlled shutdown a broker's coordinators begin no new
transaction (a BEGIN is answered before it is replicated, and one taken while the
leaderships move is lost with the old leader's tail: found by the rolling-restart test as
an UnknownTransactionError at the producer's first send); the transactions open go on."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.errors import NotCoordinatorError
from twinlog.engine.broker.broker import Broker


def test_a_broker_shutting_down_begins_no_transaction_and_finishes_those_open(
    tmp_path: Path,
) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("t", 1)
        identity = broker.init_producer("app")
        open_one = broker.begin_transaction(identity.producer_id, identity.producer_generation)
        broker.produce(
            "t",
            0,
            batch([b"kept"], identity, sequence=0, transaction_id=open_one),
            transaction_id=open_one,
        )
        broker.stop_beginning_transactions()
        with pytest.raises(NotCoordinatorError, match="shutting down"):
            broker.begin_transaction(identity.producer_id, identity.producer_generation)
        broker.commit_transaction(
            open_one, identity.producer_id, identity.producer_generation, wait_for_applied=True
        )
        assert broker.list_offset("t", 0, "latest") == 1


def test_a_broker_shutting_down_makes_the_begins_it_answered_durable_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A BEGIN is answered before its journal record is durable; the controlled shutdown must
    # make it durable before the leaderships move (on a cluster: held by the in-sync
    # replicas), or the next coordinator never heard of a transaction the producer began.
    with Broker.open(tmp_path / "data") as broker:
        identity = broker.init_producer("app")
        coordinator = broker.coordinator_manager.for_id(identity.producer_id)
        waited: list[int] = []
        wait_durable = coordinator.journal.wait_durable

        def recorded(end_offset: int) -> None:
            waited.append(end_offset)
            wait_durable(end_offset)

        monkeypatch.setattr(coordinator.journal, "wait_durable", recorded)
        broker.begin_transaction(identity.producer_id, identity.producer_generation)
        assert waited == []  # the answer did not wait
        written_end = coordinator.journal.end_offset
        broker.stop_beginning_transactions()
        assert waited and max(waited) >= written_end
