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
