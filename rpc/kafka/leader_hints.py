"""KIP-951's leader discovery: a Fetch (v12+) or Produce (v10+) partition answered
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries the partition's current leader and
epoch, and the answer (Fetch v16+, Produce v10+) the Kafka listeners of those leaders, so a
client (Kafka 3.7+, librdkafka 2.4+) sends its next request there without first asking for
metadata. Read from the cluster's state with the code, in one read
(``KafkaContext.partition_refusal``); a single node, a partition without a leader, or state
that cannot be read now adds nothing, and the client asks for metadata as before.
"""

from __future__ import annotations

from typing import Any

from twinlog.rpc.kafka.cluster import LeaderHint
from twinlog.rpc.kafka.error_codes import FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER

HINTED_CODES = (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH)


class LeaderHints:
    """The leaders named in one answer, and where their Kafka listeners are."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self.endpoints: dict[int, tuple[str, int]] = {}

    def current_leader(self, leader_type: Any, hint: LeaderHint | None, code: int) -> Any | None:
        """A ``leader_type`` (the message's LeaderIdAndEpoch) for a partition answered
        ``code`` with ``hint``; None when there is nothing to tell."""
        if not self._enabled or code not in HINTED_CODES or hint is None:
            return None
        if hint.endpoint is not None:
            self.endpoints[hint.leader_id] = hint.endpoint
        return leader_type(leader_id=hint.leader_id, leader_epoch=hint.leader_epoch)

    def node_endpoints(self, endpoint_type: Any) -> list[Any]:
        """The answer's NodeEndpoints: each leader named, at its Kafka listener."""
        return [
            endpoint_type(node_id=node_id, host=host, port=port, rack=None)
            for node_id, (host, port) in sorted(self.endpoints.items())
        ]
