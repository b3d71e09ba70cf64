"""OffsetFetch while a transaction holds some of a group's offsets: those partitions are
answered UNSTABLE_OFFSET_COMMIT on their own and the others with their offsets (KIP-447),
so confluent-kafka's ``committed()`` waits for the transaction instead of failing."""

from __future__ import annotations

import threading
from typing import Any

import confluent_kafka
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import OUTSIDE_ANY_GROUP
from twinlog.rpc.client import Producer
from twinlog.rpc.kafka.error_codes import NONE, UNSTABLE_OFFSET_COMMIT

OFFSET_FETCH_VERSION = 7  # per-topic answers, require_stable


def test_only_the_held_partition_is_unstable(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    group = f"{topic}-app"
    held, settled = TopicPartition(topic, 0), TopicPartition(topic, 1)
    kafka_server.broker.commit_offsets(group, {settled: 7}, OUTSIDE_ANY_GROUP)
    with Producer(kafka_server.broker, transactional_id=f"{topic}-tx") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send_offsets_to_transaction({(topic, 0): 3}, group)
        request = OffsetFetchRequest(
            group_id=group,
            topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])
            ],
            require_stable=True,
        )
        answer = raw.call(request, OffsetFetchResponse, OFFSET_FETCH_VERSION)
        assert answer.error_code == NONE
        (answered,) = answer.topics
        by_index = {
            p.partition_index: (p.committed_offset, p.error_code) for p in answered.partitions
        }
        assert by_index == {
            held.partition: (-1, UNSTABLE_OFFSET_COMMIT),
            settled.partition: (7, NONE),
        }

        # A client asking meanwhile waits for the transaction, then reads both offsets.
        later = threading.Timer(1.0, producer.commit_transaction)
        later.start()
        reader = confluent_kafka.Consumer(
            {
                "bootstrap.servers": kafka_server.bootstrap,
                "group.id": group,
                "socket.timeout.ms": 10_000,
            }
        )
        try:
            found = reader.committed(
                [
                    confluent_kafka.TopicPartition(topic, 0),
                    confluent_kafka.TopicPartition(topic, 1),
                ],
                timeout=15,
            )
        finally:
            reader.close()
            later.join()
    assert [(tp.partition, tp.offset, tp.error) for tp in found] == [(0, 3, None), (1, 7, None)]
