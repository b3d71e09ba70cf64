"""The client on an embedded twinlog.Broker: the same API, no network."""

from __future__ import annotations

import time
from pathlib import Path

from twinlog.rpc.client import Admin, Consumer, Producer


def test_client_on_embedded_broker(tmp_path: Path) -> None:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path / "data") as broker:
        with Admin(broker) as admin:
            admin.create_topic("embedded", 2)
        with Producer(broker, transactional_id="embedded-app") as producer:
            producer.init_transactions()
            with producer.transaction():
                producer.send("embedded", b"first", partition=0)
                producer.send("embedded", b"second", partition=1)
            producer.begin_transaction()
            producer.send("embedded", b"aborted", partition=0)
            producer.abort_transaction()
        with Producer(broker) as plain:
            assert plain.send("embedded", b"plain", partition=0).result(timeout=10).offset >= 0
        with Consumer(broker, group_id="embedded-group") as consumer:
            consumer.assign([("embedded", 0), ("embedded", 1)])
            consumer.seek_to_beginning()
            values: list[bytes | None] = []
            deadline = time.monotonic() + 10
            while len(values) < 3 and time.monotonic() < deadline:
                values.extend(record.value for record in consumer.poll(200))
            consumer.commit()
            assert consumer.committed([("embedded", 1)]) == {("embedded", 1): 1}
        assert sorted(v for v in values if v) == [b"first", b"plain", b"second"]
        assert broker.list_topics()  # still open: the client did not close it
