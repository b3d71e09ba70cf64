"""DescribeLogDirs, as ``kafka-log-dirs.sh --describe`` and admin clients ask each broker:
its one log directory (``DATA_DIR/logs``) with the size of each partition's data log, and
the volume's total and usable bytes (v4+).

A partition is listed only if the caller may read its topic (Kafka asks DESCRIBE on the
cluster; twinlog's ACLs name topics). ``OffsetLag`` is 0 and nothing is a future replica:
a broker has one log directory and never moves a replica between directories.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from typing import Any

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from twinlog.rpc.kafka.access import may
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import NONE
from twinlog.rpc.policy.auth import Operation, Resource

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
Partition = Topic.DescribeLogDirsPartition


def handle_describe_log_dirs(
    request: DescribeLogDirsRequest, version: int, context: KafkaContext
) -> DescribeLogDirsResponse:
    asked: set[tuple[str, int]] | None = None
    if request.topics is not None:
        asked = {(t.topic, p) for t in request.topics for p in t.partitions}
    directory, sizes = context.broker.log_dir_usage()
    principal = context.connection.principal
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for topic_partition, size_bytes in sizes:
        topic, partition = topic_partition.topic, topic_partition.partition
        if asked is not None and (topic, partition) not in asked:
            continue
        if not may(context.guard, principal, Operation.READ, topic, Resource.TOPIC):
            continue
        by_topic[topic].append(
            Partition(
                partition_index=partition,
                partition_size=size_bytes,
                offset_lag=0,
                is_future_key=False,
            )
        )
    usage = shutil.disk_usage(directory)
    result = Result(
        error_code=NONE,
        log_dir=directory,
        topics=[Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()],
        total_bytes=usage.total,
        usable_bytes=usage.free,
        is_cordoned=False,
    )
    return DescribeLogDirsResponse(
        version=version, throttle_time_ms=0, error_code=NONE, results=[result]
    )
