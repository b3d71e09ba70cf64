"""DescribeLogDirs, as ``kafka-log-dirs.sh --describe`` asks each broker: its log directory,
each partition's data-log size, and the volume's total and usable bytes."""

from __future__ import annotations

import os
from typing import Any

from kafka import KafkaAdminClient
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from twinlog.rpc.client import Producer

Asked = DescribeLogDirsRequest.DescribableLogDirTopic


def _sizes(answer: Any) -> dict[tuple[str, int], int]:
    (result,) = answer.results
    return {
        (topic.name, partition.partition_index): partition.partition_size
        for topic in result.topics
        for partition in topic.partitions
    }


def test_each_partitions_size_in_the_one_log_directory(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    with Producer(kafka_server.broker) as producer:
        producer.send(topic, os.urandom(5000), partition=1)
        producer.flush()
    answer = raw.call(DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 4)
    (result,) = answer.results
    assert result.error_code == 0 and result.log_dir.endswith("logs")
    assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
    sizes = _sizes(answer)
    assert sizes[(topic, 0)] == 0 and sizes[(topic, 1)] > 5000
    named = raw.call(
        DescribeLogDirsRequest(topics=[Asked(topic=topic, partitions=[1])]),
        DescribeLogDirsResponse,
        1,
    )
    assert list(_sizes(named)) == [(topic, 1)]


def test_kafka_python_reads_it(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    client = KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=10_000)
    try:
        answer = client.describe_log_dirs()
    finally:
        client.close()
    ((described,),) = [broker["log_dirs"] for broker in answer if broker["broker"] == 0]
    assert described["log_dir"].endswith("logs") and described["error_code"] == 0
    (listed,) = [t for t in described["topics"] if t["name"] == topic]
    assert [p["partition_index"] for p in listed["partitions"]] == [0]
