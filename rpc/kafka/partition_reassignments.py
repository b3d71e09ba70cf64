"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), as
``kafka-reassign-partitions.sh`` and admin clients ask, onto the broker's
``reassign_partitions`` and ``partition_reassignments``.

Alter: per partition a target replica list, or null to cancel the move that runs.
Authorised as the gRPC door's ReassignPartitions: ALTER on each topic named (Kafka asks
ALTER on the cluster; twinlog's ACLs name topics); a topic not allowed gets
TOPIC_AUTHORIZATION_FAILED on each of its partitions and the others go on. An empty list
(not null) is INVALID_REPLICATION_ASSIGNMENT, as Kafka's: the engine reads "no replicas" as
a cancel. Kafka's clients have no throttle in this API, so the copy runs unthrottled. A
partition named twice counts once, its last target (as Kafka's broker reads the request).

List: the moves that run, limited to the partitions named (null: all), shown to callers
that may describe the topic, as Metadata shows topics (Kafka asks DESCRIBE on the
cluster). A partition named with no move running, or not shown, is left out, as Kafka
leaves out a partition without one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from twinlog.engine.base.errors import InvalidReplicaAssignmentError, TwinlogError
from twinlog.engine.broker.reassignments import (
    REASSIGN_TIMEOUT_MS_MAX,
    MoveResult,
    PartitionMove,
    Reassignment,
)
from twinlog.rpc.kafka.access import ResourceDenied, require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import NONE, code_of
from twinlog.rpc.kafka.metadata import visible
from twinlog.rpc.kafka.topics import audited_change
from twinlog.rpc.policy.auth import Operation

TIMEOUT_MS_DEFAULT = 60_000  # the request's own default
NO_THROTTLE = 0
ALTER_API_KEY = AlterPartitionReassignmentsRequest.API_KEY

Answered = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
AnsweredPartition = Answered.ReassignablePartitionResponse
Ongoing = ListPartitionReassignmentsResponse.OngoingTopicReassignment
OngoingPartition = Ongoing.OngoingPartitionReassignment

# (topic, partition) -> (error code, message or None)
Outcomes = dict[tuple[str, int], tuple[int, str | None]]


def handle_alter_partition_reassignments(
    request: AlterPartitionReassignmentsRequest, version: int, context: KafkaContext
) -> AlterPartitionReassignmentsResponse:
    targets: dict[tuple[str, int], list[int] | None] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            targets[(topic.name, partition.partition_index)] = partition.replicas
    outcomes: Outcomes = {}
    denials: dict[str, ResourceDenied | None] = {}
    moves: list[PartitionMove] = []
    for (topic, index), replicas in targets.items():
        if topic not in denials:
            denials[topic] = _denied(context, topic)
        refusal: TwinlogError | None = denials[topic]
        if refusal is None and replicas is not None and not replicas:
            refusal = InvalidReplicaAssignmentError(
                f"{topic}-{index}: an empty replica list; send null to cancel a reassignment"
            )
        if refusal is not None:
            outcomes[(topic, index)] = (code_of(refusal, ALTER_API_KEY), str(refusal))
        else:
            moves.append(PartitionMove(topic, index, tuple(replicas or ())))
    top_error: TwinlogError | None = None
    if moves:
        try:
            for result in _reassign(context, moves, _timeout_ms(request.timeout_ms)):
                outcomes[(result.topic, result.partition)] = _outcome(result)
        except TwinlogError as error:  # the request as a whole (not joined, ZooKeeper away)
            top_error = error
            code = code_of(error, ALTER_API_KEY)
            outcomes.update({(m.topic, m.partition): (code, str(error)) for m in moves})
    # In the order asked, grouped by topic
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for topic, index in targets:
        code, message = outcomes[(topic, index)]
        by_topic[topic].append(
            AnsweredPartition(partition_index=index, error_code=code, error_message=message)
        )
    return AlterPartitionReassignmentsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=NONE if top_error is None else code_of(top_error, ALTER_API_KEY),
        error_message=None if top_error is None else str(top_error),
        responses=[Answered(name=name, partitions=parts) for name, parts in by_topic.items()],
    )


def _denied(context: KafkaContext, topic: str) -> ResourceDenied | None:
    """The refusal of ALTER on ``topic`` (audited once per topic named), or None."""
    try:
        require(context.guard, context.connection.principal, Operation.ALTER, (topic,))
    except ResourceDenied as denial:
        return denial
    return None


def _timeout_ms(asked: int) -> int:
    """The request's wait, within the engine's bound (a worker is held meanwhile)."""
    return min(asked if asked > 0 else TIMEOUT_MS_DEFAULT, REASSIGN_TIMEOUT_MS_MAX)


def _reassign(
    context: KafkaContext, moves: list[PartitionMove], timeout_ms: int
) -> list[MoveResult]:
    described = ";".join(
        f"{m.topic}-{m.partition}:{','.join(map(str, m.replicas)) or 'cancel'}" for m in moves
    )
    with audited_change(
        context, "partitions.reassign", moves=described, throttle_bytes_per_s=NO_THROTTLE
    ):
        return context.broker.reassign_partitions(moves, NO_THROTTLE, timeout_ms)


def _outcome(result: MoveResult) -> tuple[int, str | None]:
    if result.error is None:
        return NONE, None
    return code_of(result.error, ALTER_API_KEY), str(result.error)


def handle_list_partition_reassignments(
    request: ListPartitionReassignmentsRequest, version: int, context: KafkaContext
) -> ListPartitionReassignmentsResponse:
    asked: set[tuple[str, int]] | None = None
    if request.topics is not None:
        asked = {(t.name, index) for t in request.topics for index in t.partition_indexes}
    try:
        running = context.broker.partition_reassignments()
    except TwinlogError as error:
        return ListPartitionReassignmentsResponse(
            version=version,
            throttle_time_ms=0,
            error_code=code_of(error, ListPartitionReassignmentsRequest.API_KEY),
            error_message=str(error),
            topics=[],
        )
    by_topic: dict[str, list[Any]] = defaultdict(list)
    shown: dict[str, bool] = {}
    for reassignment in sorted(running, key=lambda r: (r.topic, r.partition)):
        topic = reassignment.topic
        if asked is not None and (topic, reassignment.partition) not in asked:
            continue
        if topic not in shown:
            shown[topic] = visible(context, topic)
        if shown[topic]:
            by_topic[topic].append(_ongoing(reassignment))
    return ListPartitionReassignmentsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=NONE,
        error_message=None,
        topics=[Ongoing(name=name, partitions=parts) for name, parts in by_topic.items()],
    )


def _ongoing(reassignment: Reassignment) -> Any:
    # Kafka's replicas are all of them while the move runs (the target, then those leaving),
    # as the engine's are.
    return OngoingPartition(
        partition_index=reassignment.partition,
        replicas=list(reassignment.replicas),
        adding_replicas=list(reassignment.adding),
        removing_replicas=list(reassignment.removing),
    )
