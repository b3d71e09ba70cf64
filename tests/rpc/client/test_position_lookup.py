"""A starting position looked up for an assignment the consumer no longer has is not used.

poll() looks up where a newly assigned partition starts (the group's committed offset) in
the background, and a lookup unanswered at the poll's deadline stays in flight for the
next poll. Were the partition taken away meanwhile, and given back after another owner
had copied on and committed further, the old answer would start this consumer at the old
offset: the other owner's records copied twice (an exactly-once pipeline seen to do so).
Kafka's coordinator drops a pending OffsetFetch of an older generation the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin, Consumer, Producer

TOPIC_PARTITION = TopicPartition("moving", 0)
WAIT_S = 10.0


def test_a_lookup_answered_after_its_partition_left_is_asked_again(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        with Admin(broker) as admin:
            admin.create_topic("moving", 1)
        with Producer(broker) as producer:
            for index in range(20):
                producer.send("moving", b"%d" % index, partition=0)
            producer.flush()
        with Consumer(broker, group_id="g", enable_auto_commit=False) as other_owner:
            other_owner.assign([TOPIC_PARTITION])
            other_owner.commit({TOPIC_PARTITION: 5})

        real_fetch_offsets = broker.fetch_offsets
        asked = threading.Event()
        answer_gate = threading.Event()

        def slow_fetch_offsets(
            group_id: str, partitions: Iterable[TopicPartition]
        ) -> dict[TopicPartition, int]:
            answer = real_fetch_offsets(group_id, partitions)  # read now, answered late
            asked.set()
            assert answer_gate.wait(WAIT_S)
            return answer

        broker.fetch_offsets = slow_fetch_offsets  # type: ignore[method-assign]
        with Consumer(broker, group_id="g", enable_auto_commit=False) as consumer:
            consumer.assign([TOPIC_PARTITION])
            assert consumer.poll(timeout_ms=0) == []  # the lookup stays in flight
            assert asked.wait(WAIT_S)
            consumer.assign([])  # the partition leaves this consumer...
            with Consumer(broker, group_id="g", enable_auto_commit=False) as other_owner:
                other_owner.assign([TOPIC_PARTITION])
                other_owner.commit({TOPIC_PARTITION: 12})  # ...its next owner copies on
            consumer.assign([TOPIC_PARTITION])  # ...and it comes back
            answer_gate.set()
            deadline = time.monotonic() + WAIT_S
            records = []
            while not records:
                assert time.monotonic() < deadline, "no record polled"
                records = consumer.poll(timeout_ms=200)
    assert records[0].offset == 12, f"started at {records[0].offset}: an old lookup's answer"
