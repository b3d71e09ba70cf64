"""DescribeTransactions (KIP-664): the transaction of each transactional id named, as
``kafka-transactions.sh describe`` and admin clients ask the id's coordinator (found with
FindCoordinator), from this broker's coordinators' ``list_transactions``.

Per transactional id, as Kafka says it: TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless the
caller may describe it (DESCRIBE, or WRITE or ABORT, which imply it: Kafka's rule, the
gRPC door's), checked first; NOT_COORDINATOR when another broker coordinates it (on a
cluster); INVALID_REQUEST for an empty id; TRANSACTIONAL_ID_NOT_FOUND when its
coordinator, here, has no transaction of it.

twinlog keeps no row for a transactional id between its transactions, so an id whose
producer has none open is not found (Kafka describes it as ``Empty``), as ListTransactions
does not list it. A transaction being completed reads PrepareCommit, PrepareAbort,
CompleteCommit or CompleteAbort with every partition it wrote to.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TransactionDescription
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    AUTHORIZATION_FAILED_CODES,
    INVALID_REQUEST,
    NONE,
    NOT_COORDINATOR,
    TRANSACTIONAL_ID_NOT_FOUND,
    code_of,
)
from twinlog.rpc.kafka.list_transactions import KAFKA_STATE_NAMES
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.policy.auth import Operation, Resource
from twinlog.rpc.wire.broker_api import CoordinatorKeyType

DENIED = AUTHORIZATION_FAILED_CODES[Resource.TRANSACTIONAL_ID.value]

Described = DescribeTransactionsResponse.TransactionState
TopicData = Described.TopicData


def handle_describe_transactions(
    request: DescribeTransactionsRequest, version: int, context: KafkaContext
) -> DescribeTransactionsResponse:
    asked: list[str] = list(request.transactional_ids or [])
    # Listed in transaction id order: the last of an id is its newest (a producer may open
    # its next transaction while its last one's markers are still being applied).
    newest: dict[str, TransactionDescription] = {}
    if asked:
        for item in context.broker.list_transactions():
            newest[item.transactional_id] = item
    states = [_describe(context, transactional_id, newest) for transactional_id in asked]
    return DescribeTransactionsResponse(
        version=version, throttle_time_ms=0, transaction_states=states
    )


def _describe(
    context: KafkaContext, transactional_id: str, newest: dict[str, TransactionDescription]
) -> Any:
    if not _may_describe(context, transactional_id):
        return _refused(transactional_id, DENIED)
    if not transactional_id:
        return _refused(transactional_id, INVALID_REQUEST)
    found = newest.get(transactional_id)
    if found is not None:
        return _described(found)
    return _refused(transactional_id, _not_here_code(context, transactional_id))


def _may_describe(context: KafkaContext, transactional_id: str) -> bool:
    principal = context.connection.principal
    if context.guard.may_describe_transactional_id(principal, transactional_id):
        return True
    audit(  # a denial is audited as every ACL refusal is
        "acl.denied",
        principal=principal.name,
        action=Operation.DESCRIBE.value,
        resource=Resource.TRANSACTIONAL_ID.value,
        name=transactional_id,
    )
    return False


def _not_here_code(context: KafkaContext, transactional_id: str) -> int:
    """NOT_COORDINATOR when the id is another broker's (or the cluster cannot say whose),
    else TRANSACTIONAL_ID_NOT_FOUND: a single node coordinates every id."""
    if context.cluster is None:
        return TRANSACTIONAL_ID_NOT_FOUND
    try:
        found = context.cluster.find_coordinator(CoordinatorKeyType.TRANSACTION, transactional_id)
    except TwinlogError as error:
        return code_of(error, DescribeTransactionsRequest.API_KEY)
    if found.broker.broker_id != context.cluster.broker_id:
        return NOT_COORDINATOR
    return TRANSACTIONAL_ID_NOT_FOUND


def _described(item: TransactionDescription) -> Any:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(item.partitions):
        by_topic[topic].append(partition)
    return Described(
        error_code=NONE,
        transactional_id=item.transactional_id,
        transaction_state=KAFKA_STATE_NAMES[item.state],
        transaction_timeout_ms=item.timeout_ms,
        transaction_start_time_ms=item.started_ms,
        producer_id=item.producer_id,
        producer_epoch=item.producer_generation,
        topics=[TopicData(topic=topic, partitions=parts) for topic, parts in by_topic.items()],
    )


def _refused(transactional_id: str, code: int) -> Any:
    # Every other field at the schema's default (0, ""), as Kafka leaves them.
    return Described(error_code=code, transactional_id=transactional_id)
