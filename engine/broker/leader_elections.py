"""Preferred leader elections as the broker answers them (Kafka's ElectLeaders, PREFERRED).

A partition's preferred leader is its first replica. On a cluster the controller decides
(``engine/zookeeper/leader_election`` has the rule, ``engine/zookeeper/preferred_election``
the request); a single node leads every partition itself, its one replica, so every
election there is ``NOT_NEEDED`` (``sole_results``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.types import TopicPartition

# An election waits for the controller at most this long: the caller's thread (a server
# worker, a Kafka connection) is held meanwhile, so no door may ask for longer.
ELECT_TIMEOUT_MS_MAX = 600_000


def check_timeout(timeout_ms: int) -> None:
    """InvalidConfigError unless 1 <= ``timeout_ms`` <= ELECT_TIMEOUT_MS_MAX."""
    if not 0 < timeout_ms <= ELECT_TIMEOUT_MS_MAX:
        raise InvalidConfigError(
            f"an election's timeout_ms is {timeout_ms}: give 1..{ELECT_TIMEOUT_MS_MAX}"
        )


class ElectionOutcome(Enum):
    ELECTED = "elected"  # the preferred leader leads now, and did not before
    NOT_NEEDED = "not needed"  # it led already (Kafka's ELECTION_NOT_NEEDED)
    NOT_AVAILABLE = "not available"  # not in sync, not alive, or shutting down
    UNKNOWN_PARTITION = "unknown partition"
    TIMED_OUT = "timed out"  # no controller carried the request out in time


@dataclass(frozen=True)
class ElectionResult:
    topic: str
    partition: int
    outcome: ElectionOutcome
    leader: int  # after the request (-1: offline, or unknown)
    preferred: int  # the first replica (-1: unknown)
    message: str  # what happened, or why not, in words

    @property
    def succeeded(self) -> bool:
        return self.outcome in (ElectionOutcome.ELECTED, ElectionOutcome.NOT_NEEDED)


def sole_results(
    partitions: Iterable[TopicPartition], known: Iterable[TopicPartition]
) -> list[ElectionResult]:
    """A single node's answer: every known partition is led by its one replica already."""
    led = set(known)
    return [
        ElectionResult(
            topic, partition, ElectionOutcome.NOT_NEEDED, 0, 0,
            "led by its preferred leader already (a single node)",
        )
        if TopicPartition(topic, partition) in led
        else ElectionResult(
            topic, partition, ElectionOutcome.UNKNOWN_PARTITION, -1, -1,
            f"{topic}-{partition}: no such partition",
        )
        for topic, partition in partitions
    ]  # fmt: skip
