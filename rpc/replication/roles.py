"""What the replication adapter needs of a broker: a leader's and a follower's side.

``engine/broker/broker.py``'s ``Broker`` has both; tests pass small fakes. Kept apart
from the engine, which knows nothing of gRPC (setup.cfg's import contract).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from twinlog.engine.replication.fetch_calls import FetchedPartition, ReplicaFetch


class ReplicaLeader(Protocol):
    def replica_fetch(self, request: ReplicaFetch) -> list[FetchedPartition]:
        """Answer a follower, in the request's order; long-polls up to ``max_wait_ms``."""
        ...


class ReplicaFollower(Protocol):
    broker_id: int

    def replica_fetch_request(self, leader_id: int) -> ReplicaFetch | None:
        """What this broker fetches from ``leader_id`` now; None: nothing."""
        ...

    def apply_replica_fetch(self, leader_id: int, fetched: Sequence[FetchedPartition]) -> None:
        """Truncate, append and advance the high watermark from ``leader_id``'s answer."""
        ...
