"""A consumer placed inside a batch gets the records from its position on, not the batch's
earlier ones (a fetch returns whole batches, the first may start before the position)."""

from __future__ import annotations

from pathlib import Path

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin, Consumer, ConsumerRecord, Producer

TOPIC_PARTITION = TopicPartition("middle", 0)


def test_a_position_inside_a_batch_skips_the_batch_records_before_it(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        with Admin(broker) as admin:
            admin.create_topic("middle", 1)
        with Producer(broker) as producer:
            producer.send_batch("middle", 0, [b"a%d" % n for n in range(10)], keys=[b"k"] * 10)
            producer.send_batch("middle", 0, [b"b%d" % n for n in range(5)])
            producer.flush()
        with Consumer(broker) as consumer:
            consumer.assign([TOPIC_PARTITION])
            consumer.seek(TOPIC_PARTITION, 7)
            records: list[ConsumerRecord] = []
            for _ in range(20):
                records += consumer.poll(timeout_ms=500)
                if len(records) >= 8:
                    break
    assert [record.offset for record in records] == list(range(7, 15))
    assert [record.value for record in records] == [b"a7", b"a8", b"a9"] + [
        b"b%d" % n for n in range(5)
    ]
    first = records[0]
    assert isinstance(first, ConsumerRecord)
    assert (first.topic, first.partition, first.key, tuple(first.headers)) == (
        "middle",
        0,
        b"k",
        (),
    )
    assert first.timestamp_ms > 0
