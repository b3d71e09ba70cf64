"""A commit's metadata string and leader epoch, kept with its offset and answered back by
OffsetFetch, through plain commits (OffsetCommit) and a transaction's (TxnOffsetCommit);
metadata over the broker's limit is OFFSET_METADATA_TOO_LARGE for its partition only."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import kafka.errors
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KafkaTopicPartition

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import OffsetAndMetadata as Committed

CLIENT_TIMEOUT_MS = 10_000


def test_kafka_python_gets_back_metadata_and_epoch_and_a_too_long_one_is_refused(
    kafka_server: Any,
) -> None:
    topic = kafka_server.topic(partitions=3)
    group = f"{topic}-tool"
    kept, long, plain = (KafkaTopicPartition(topic, p) for p in range(3))
    admin = KafkaAdminClient(
        bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    try:
        answers = admin.alter_group_offsets(
            group,
            {
                kept: OffsetAndMetadata(5, "checkpoint-ü 17", 4),
                long: OffsetAndMetadata(6, "x" * 4097, 4),  # one past offset.metadata.max.bytes
                plain: OffsetAndMetadata(7, "", -1),
            },
        )
        assert answers == {
            kept: kafka.errors.NoError,
            long: kafka.errors.OffsetMetadataTooLargeError,
            plain: kafka.errors.NoError,
        }
        found = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    assert found == {
        kept: OffsetAndMetadata(5, "checkpoint-ü 17", 4),
        plain: OffsetAndMetadata(7, "", -1),
    }  # nothing of the refused partition was committed
    assert kafka_server.broker.fetch_committed(group, [TopicPartition(topic, 1)]) == {
        TopicPartition(topic, 1): Committed(-1)
    }


def test_confluent_commits_and_a_transaction_keep_metadata_read_at_once(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    group = f"{topic}-app"
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "transactional.id": f"{topic}-tx",
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    try:
        consumer.commit(
            offsets=[
                confluent_kafka.TopicPartition(topic, 0, 11, metadata="plain", leader_epoch=2)
            ],
            asynchronous=False,
        )
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition(topic, 1, 21, metadata="in a txn", leader_epoch=3)],
            consumer.consumer_group_metadata(),
            10,
        )
        producer.commit_transaction(10)
        # Right after the commit: the offsets may still be applying, which committed() waits
        # out (UNSTABLE_OFFSET_COMMIT on that partition alone), then reads them.
        found = consumer.committed(
            [confluent_kafka.TopicPartition(topic, 0), confluent_kafka.TopicPartition(topic, 1)],
            timeout=15,
        )
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset, tp.metadata, tp.leader_epoch, tp.error) for tp in found] == [
        (0, 11, "plain", 2, None),
        (1, 21, "in a txn", 3, None),
    ]
