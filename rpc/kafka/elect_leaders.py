"""ElectLeaders (KIP-460), PREFERRED: lead partitions by their first replicas again, as
``kafka-leader-election.sh --election-type PREFERRED`` and ``AdminClient.elect_leaders`` ask.

The broker's own election (``Broker.elect_preferred_leaders``; the controller decides on a
cluster, a single node leads everything already). Authorised as the gRPC door's
ElectLeaders: ALTER on each topic named (Kafka asks ALTER on the cluster; twinlog's ACLs
name topics), and with no partition named, ``alterable_partitions``: every partition, or
with an ACL file, those of the topics the caller may alter. A ``timeout_ms`` above the
broker's bound (``ELECT_TIMEOUT_MS_MAX``) waits that long at most. UNCLEAN is refused: twinlog never elects a replica outside the ISR.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka.errors import ElectionNotNeededError, PreferredLeaderNotAvailableError
from kafka.protocol.admin import ElectionType, ElectLeadersRequest, ElectLeadersResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.leader_elections import (
    ELECT_TIMEOUT_MS_MAX,
    ElectionOutcome,
    ElectionResult,
)
from twinlog.rpc.kafka.access import require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    INVALID_REQUEST,
    NONE,
    REQUEST_TIMED_OUT,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
    code_of,
)
from twinlog.rpc.kafka.topics import audited_change
from twinlog.rpc.policy.alterable_partitions import alterable_partitions
from twinlog.rpc.policy.auth import Operation

ELECTION_NOT_NEEDED = ElectionNotNeededError.errno
PREFERRED_LEADER_NOT_AVAILABLE = PreferredLeaderNotAvailableError.errno
CODES = {
    ElectionOutcome.ELECTED: NONE,
    ElectionOutcome.NOT_NEEDED: ELECTION_NOT_NEEDED,
    ElectionOutcome.NOT_AVAILABLE: PREFERRED_LEADER_NOT_AVAILABLE,
    ElectionOutcome.UNKNOWN_PARTITION: UNKNOWN_TOPIC_OR_PARTITION,
    ElectionOutcome.TIMED_OUT: REQUEST_TIMED_OUT,
}
TIMEOUT_MS_DEFAULT = 60_000  # the request's own default
TOP_LEVEL_ERROR_VERSION = 1  # ErrorCode (and ElectionType) from v1

Topic = ElectLeadersResponse.ReplicaElectionResult
Partition = Topic.PartitionResult


def handle_elect_leaders(
    request: ElectLeadersRequest, version: int, context: KafkaContext
) -> ElectLeadersResponse:
    election_type = getattr(request, "election_type", ElectionType.PREFERRED.value)
    named = [
        TopicPartition(item.topic, partition)
        for item in request.topic_partitions or ()
        for partition in item.partitions
    ]
    answered: dict[TopicPartition, tuple[int, str | None]] = {}
    if election_type != ElectionType.PREFERRED.value:
        why = "twinlog never elects a replica outside the ISR: only PREFERRED elections"
        if request.topic_partitions is None:
            return _response(version, {}, INVALID_REQUEST)
        return _response(version, {tp: (INVALID_REQUEST, why) for tp in named})
    principal = context.connection.principal
    asked: list[TopicPartition] | None
    if request.topic_partitions is None:
        try:
            asked = alterable_partitions(context.guard, principal, context.broker)
        except TwinlogError:  # may alter no topic: nothing to answer for (Kafka's way)
            return _response(version, {}, TOPIC_AUTHORIZATION_FAILED)
    else:
        asked = []
        for topic_partition in named:
            try:
                require(context.guard, principal, Operation.ALTER, (topic_partition.topic,))
                asked.append(topic_partition)
            except TwinlogError as error:
                answered[topic_partition] = (
                    code_of(error, ElectLeadersRequest.API_KEY),
                    str(error),
                )
    if asked is None or asked:
        timeout_ms = request.timeout_ms if request.timeout_ms > 0 else TIMEOUT_MS_DEFAULT
        timeout_ms = min(timeout_ms, ELECT_TIMEOUT_MS_MAX)  # Kafka's clients ask 60 s
        try:
            counted = "all" if asked is None else len(asked)
            with audited_change(context, "leaders.elect", partitions=counted):
                results = context.broker.elect_preferred_leaders(asked, timeout_ms)
        except TwinlogError as error:
            code = code_of(error, ElectLeadersRequest.API_KEY)
            return _response(version, {tp: (code, str(error)) for tp in asked or ()}, code)
        for result in results:
            answered[TopicPartition(result.topic, result.partition)] = _answer(result)
    return _response(version, answered)


def _answer(result: ElectionResult) -> tuple[int, str | None]:
    code = CODES[result.outcome]
    return code, None if code == NONE else result.message


def _response(
    version: int, answered: dict[TopicPartition, tuple[int, str | None]], error_code: int = NONE
) -> ElectLeadersResponse:
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for topic_partition, (code, message) in answered.items():
        by_topic[topic_partition.topic].append(
            Partition(
                partition_id=topic_partition.partition, error_code=code, error_message=message
            )
        )
    fields: dict[str, Any] = {
        "version": version,
        "throttle_time_ms": 0,
        "replica_election_results": [
            Topic(topic=topic, partition_result=partitions)
            for topic, partitions in by_topic.items()
        ],
    }
    if version >= TOP_LEVEL_ERROR_VERSION:
        fields["error_code"] = error_code
    return ElectLeadersResponse(**fields)
