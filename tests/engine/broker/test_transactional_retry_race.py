"""A retry of a transactional batch that races its original is a duplicate, not a second
entry.

Found by the 1,000-fault nemesis run (seed 1075882741): one batch journaled twice in one
transaction and copied twice. A client that gives up waiting resends the batch while the
original is still inside its journal append; the sequence check must see the original.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch

APPEND_DELAY_S = 0.3  # the original's journal append, held long enough for the retry to arrive


def test_a_retry_racing_its_original_is_journaled_once(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("orders", 1)
        producer = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        batch = build_batch(
            [b"once"],
            producer_id=producer.producer_id,
            producer_generation=producer.producer_generation,
            base_sequence=0,
            transactional=True,
        )
        partition = broker.partition(TopicPartition("orders", 0))
        real_append = partition.journal.append

        def slow_append(*args: object, **kwargs: object) -> object:
            time.sleep(APPEND_DELAY_S)
            return real_append(*args, **kwargs)  # type: ignore[arg-type]

        partition.journal.append = slow_append  # type: ignore[method-assign]
        results = []

        def send() -> None:
            results.append(
                broker.produce("orders", 0, batch, transaction_id=transaction_id).duplicate
            )

        senders = [threading.Thread(target=send) for _ in range(2)]
        for sender in senders:
            sender.start()
            time.sleep(APPEND_DELAY_S / 3)  # the retry comes while the original appends
        for sender in senders:
            sender.join(10)
        assert sorted(results) == [False, True]  # one written, one answered as a duplicate
        assert partition.journaled_entries(transaction_id) == 1
