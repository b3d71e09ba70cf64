"""A committed transaction is readable once its copy is durable in the data log, before
the APPLIED record (a journal sync) is written: a waiting fetch is woken then."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Producer


def test_a_long_poll_sees_the_copy_before_its_applied_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("t", 1)
        partition = broker.partition(TopicPartition("t", 0))
        journal = partition.writer.journal
        real_mark_applied = journal.mark_applied_all
        release = threading.Event()
        marking = threading.Event()

        def slow_mark_applied(*args: object, **kwargs: object) -> object:
            marking.set()
            assert release.wait(10)
            return real_mark_applied(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(journal, "mark_applied_all", slow_mark_applied)
        with Producer(broker, transactional_id="early") as producer:
            producer.init_transactions()
            with producer.transaction():
                producer.send("t", b"committed", partition=0)
                transaction_id = producer.transaction_id
            assert transaction_id is not None
            assert marking.wait(10)  # the copy is in the log; APPLIED is held back
            fetched = broker.fetch("t", 0, 0, 1 << 20, max_wait_ms=5_000)
            assert fetched.log_end_offset == 1 and fetched.records
            record = journal.transaction(partition.name, transaction_id)
            assert record is not None and record.state.name == "APPLYING"
            release.set()
