"""A follower's fetch from its partition leader, as plain values (CLUSTER.md §3.3).

One request covers every partition a follower replicates from one leader broker (one
long poll per leader, as Kafka's replica fetcher does), and each of a partition's
replicated logs (``LogKind``: the data log, and the journal log of its transactions'
batches, co-led) is fetched as an item of its own:

    ReplicaFetch(replica_id, broker_epoch, partitions=[ReplicaFetchPartition...])
      -> [FetchedPartition...], in the request's order

A follower's ``fetch_offset`` acknowledges every offset below it (it fsynced them
before asking, when ``replica_fsync`` is on); ``last_fetched_epoch`` is the epoch of
its last batch, so the leader can tell it where their logs part (``diverging``, KIP-320).
``current_leader_epoch`` is the epoch the follower believes the leader has: a stale one
is refused per partition (``error``) and changes nothing. A gRPC service carries these
field by field; in-process tests hand them over as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.log.leader_epochs import EpochEnd


class LogKind(Enum):
    """A partition's replicated logs (CLUSTER.md §3.3)."""

    DATA = "data"  # what consumers read
    JOURNAL = "journal"  # its transactions' batches and the copier's marks (journal_logs)


@dataclass(frozen=True)
class ReplicaFetchPartition:
    topic_partition: TopicPartition
    fetch_offset: int
    last_fetched_epoch: int  # NO_EPOCH (-1) for an empty log
    current_leader_epoch: int
    log: LogKind = LogKind.DATA
    max_bytes: int = 0  # less than the request's for this partition (a throttle); 0: that


def new_leadership_key(follower_id: int) -> tuple[str, int]:
    """The long-poll key a leader wakes when it takes the leadership of a partition that
    ``follower_id`` replicates: that follower's fetch waiting here names only the
    partitions it followed before, so it ends at once and the next one names this
    partition too (else the new leader's promotion barrier, and every write, waited out
    the rest of the follower's ``max_wait_ms``)."""
    return ("new leadership for", follower_id)


@dataclass(frozen=True)
class ReplicaFetch:
    replica_id: int  # the follower's broker id
    broker_epoch: int  # the follower's registration (KIP-380): a stale one may not join the ISR
    partitions: tuple[ReplicaFetchPartition, ...]
    max_wait_ms: int = 500
    max_bytes: int = 8 * MEBIBYTE  # per partition


@dataclass(frozen=True)
class FetchedPartition:
    topic_partition: TopicPartition
    records: bytes = b""  # whole batches from fetch_offset, as the leader's log holds them
    high_watermark: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    # Set when the follower's log parts from the leader's at or before fetch_offset: the
    # leader's (epoch, end offset) for the follower's last fetched epoch; no records then.
    diverging: EpochEnd | None = None
    # The name of the TwinlogError refusing this partition (NotLeaderOrFollowerError,
    # FencedLeaderEpochError, ...) and its message; nothing else is set then.
    error: str = ""
    message: str = ""
    log: LogKind = LogKind.DATA
