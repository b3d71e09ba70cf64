"""FindCoordinator: this listener coordinates every group and transactional id (a single
node: the embedded broker's coordinators hold every key)."""

from __future__ import annotations

from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from twinlog.rpc.kafka.context import NODE_ID, KafkaContext
from twinlog.rpc.kafka.error_codes import NONE

BATCHED_KEYS_VERSION = 4  # from this version a request names many keys


def handle_find_coordinator(
    request: FindCoordinatorRequest, version: int, context: KafkaContext
) -> FindCoordinatorResponse:
    host, port = context.endpoint()
    if version < BATCHED_KEYS_VERSION:
        return FindCoordinatorResponse(
            version=version,
            throttle_time_ms=0,
            error_code=NONE,
            error_message=None,
            node_id=NODE_ID,
            host=host,
            port=port,
        )
    coordinators = [
        FindCoordinatorResponse.Coordinator(
            key=key, node_id=NODE_ID, host=host, port=port, error_code=NONE, error_message=None
        )
        for key in request.coordinator_keys
    ]
    return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)
