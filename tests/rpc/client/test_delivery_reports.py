"""Delivery reports say whether the offset is known: a transactional record's resolves on
commit (offset_pending), a plain record's is there at once."""

from __future__ import annotations

from pathlib import Path

from twinlog.rpc.client import Admin, Producer, RecordMetadata


def test_transactional_offsets_are_pending_and_plain_ones_are_known(tmp_path: Path) -> None:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path / "data") as broker:
        with Admin(broker) as admin:
            admin.create_topic("reports", 1)
        with Producer(broker, transactional_id="reports-app", linger_ms=0) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            futures = [producer.send("reports", b"%d" % n, partition=0) for n in range(3)]
            producer.commit_transaction(wait_for_applied=True)
            pending = [future.result(timeout=10) for future in futures]
        assert all(report.offset_pending and not report.has_offset for report in pending)
        assert {report.offset for report in pending} == {-1}
        with Producer(broker, linger_ms=0) as plain:
            known = plain.send("reports", b"plain", partition=0).result(timeout=10)
        assert not known.offset_pending and known.has_offset
        assert known.offset == 3  # after the three records the commit applied


def test_record_metadata_keeps_its_four_fields_first() -> None:
    report = RecordMetadata("t", 0, 5, 1000)
    topic, partition, offset, timestamp_ms, offset_pending = report
    assert (topic, partition, offset, timestamp_ms, offset_pending) == ("t", 0, 5, 1000, False)
    assert report.has_offset
