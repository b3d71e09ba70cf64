"""FindCoordinator: a single node's listener coordinates every group and transactional id
(the embedded broker's coordinators hold every key); a cluster broker's names the broker
leading the key's coordinator partition (of ``__consumer_offsets`` for a group, of
``__txn_journal`` for a transactional id), as the gRPC server finds it.

A key whose coordinator partition has no live leader yet is answered
COORDINATOR_NOT_AVAILABLE (retriable: the client asks again); one coordinated by a broker
without a Kafka listener, COORDINATOR_NOT_AVAILABLE too, saying so.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.context import NODE_ID, KafkaContext
from twinlog.rpc.kafka.error_codes import (
    COORDINATOR_NOT_AVAILABLE,
    INVALID_REQUEST,
    NONE,
    code_of,
)
from twinlog.rpc.wire.broker_api import CoordinatorKeyType

BATCHED_KEYS_VERSION = 4  # from this version a request names many keys
KEY_TYPES = {0: CoordinatorKeyType.GROUP, 1: CoordinatorKeyType.TRANSACTION}
NO_NODE = -1


def _find(context: KafkaContext, key_type: int, key: str) -> tuple[int, str, int, int, str | None]:
    """(node id, host, port, error code, error message) of ``key``'s coordinator."""
    host, port = context.endpoint()
    if context.cluster is None:
        return NODE_ID, host, port, NONE, None
    kind = KEY_TYPES.get(key_type)
    if kind is None:
        return NO_NODE, "", -1, INVALID_REQUEST, f"key type {key_type} is not served"
    try:
        found = context.cluster.find_coordinator(kind, key)
    except TwinlogError as error:
        return NO_NODE, "", -1, code_of(error, FindCoordinatorRequest.API_KEY), str(error)
    address = found.broker.kafka_address
    if address is None:
        return (
            NO_NODE,
            "",
            -1,
            COORDINATOR_NOT_AVAILABLE,
            f"the coordinator, broker {found.broker.broker_id}, has no Kafka listener",
        )
    return found.broker.broker_id, address[0], address[1], NONE, None


def handle_find_coordinator(
    request: FindCoordinatorRequest, version: int, context: KafkaContext
) -> FindCoordinatorResponse:
    if version < BATCHED_KEYS_VERSION:
        key_type = request.key_type if version >= 1 else 0  # v0: groups only
        node_id, host, port, error_code, message = _find(context, key_type, request.key)
        return FindCoordinatorResponse(
            version=version,
            throttle_time_ms=0,
            error_code=error_code,
            error_message=message,
            node_id=node_id,
            host=host,
            port=port,
        )
    coordinators: list[Any] = []
    for key in request.coordinator_keys:
        node_id, host, port, error_code, message = _find(context, request.key_type, key)
        coordinators.append(
            FindCoordinatorResponse.Coordinator(
                key=key,
                node_id=node_id,
                host=host,
                port=port,
                error_code=error_code,
                error_message=message,
            )
        )
    return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)
