"""What a broker keeps about its cluster outside the logs: ``MetadataStore``.

Topics, the ids that name the cluster and this data directory, the number of
transaction-journal partitions, and each coordinator's checkpoint pointer. On one
node these are local files (``LocalMetadataStore``); in a cluster they move to
ZooKeeper (``topics/<topic>``, ``cluster_id``, ``coordinators/<N>``), so the broker
reaches them only through this Protocol and a ZooKeeper version drops in.

Writes have the shape of conditional writes: ``add_topic`` fails with
TopicExistsError when the name is taken (a create, not an overwrite), and every
topic carries the ``version`` the store gave it (ZooKeeper's zkVersion; 0 when
created), for conditional changes once topics can change.

``data_dir_id`` is random and created with the data directory (KIP-903): a wiped
disk is a new directory, so a replica restarted on one can be told from the one
that held the data. It is kept beside the data, never in the shared store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from twinlog.engine.broker.topic_registry import TopicMeta
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointerStore


class MetadataStore(Protocol):
    """Thread rule: the broker serialises changes (its admin lock); reads may race harmlessly."""

    @property
    def cluster_id(self) -> str:
        """Random, given when the cluster (today: the data directory) was created."""
        ...

    @property
    def data_dir_id(self) -> str:
        """Random, given when this data directory was created (KIP-903)."""
        ...

    @property
    def journal_partitions(self) -> int:
        """Transaction-journal partitions: fixed at creation (ids carry their partition)."""
        ...

    def topics(self) -> Mapping[str, TopicMeta]:
        """Every topic by name, internal ones included."""
        ...

    def get_topic(self, name: str) -> TopicMeta:
        """The topic; UnknownTopicOrPartitionError if there is none of that name."""
        ...

    def add_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, str],
        *,
        replication_factor: int = 1,
    ) -> TopicMeta:
        """Create a topic (with a new topic id, version 0); TopicExistsError if it exists,
        InvalidConfigError for a bad name or partition count. Durable when it returns.
        ``replication_factor``: copies the cluster keeps of each partition (a cluster's
        store assigns them; a store of one data directory keeps one and ignores it)."""
        ...

    def grow_topic(self, name: str, partitions: int) -> TopicMeta:
        """Give a topic more partitions (``partitions`` in all); InvalidPartitionsError for
        a count not above its own or beyond the limit. Durable when it returns."""
        ...

    def set_topic_config(self, name: str, config: Mapping[str, str]) -> TopicMeta:
        """Replace a topic's settings with ``config`` (checked by the caller). Durable when it
        returns; a cluster's brokers apply it to their replicas as they see it."""
        ...

    def remove_topic(self, name: str) -> None:
        """Remove a topic; UnknownTopicOrPartitionError if there is none. Durable on return."""
        ...

    def checkpoint_pointers(
        self, journal_partition: int, coordinator_epoch: int = 0
    ) -> CheckpointPointerStore:
        """Where coordinator ``journal_partition`` keeps its checkpoint pointer; writes name
        ``coordinator_epoch`` (the loaded leader epoch of its journal partition)."""
        ...
