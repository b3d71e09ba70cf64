"""In-memory ``MetadataStore`` and ``IdSource``: what a ZooKeeper version would hold, in dicts.

They prove the broker and the coordinator need nothing of the local files behind
the two Protocols, and they survive a broker's close, as a shared store would.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from types import MappingProxyType

from twinlog.engine.base.errors import TopicExistsError, UnknownTopicOrPartitionError
from twinlog.engine.broker.topic_registry import TopicMeta, validate_topic_name
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer

BLOCK_SIZE = 10  # small: the tests cross block boundaries


class InMemoryPointer:
    def __init__(self) -> None:
        self.pointer: CheckpointPointer | None = None
        self.writes = 0

    def read(self) -> CheckpointPointer | None:
        return self.pointer

    def write(self, pointer: CheckpointPointer) -> None:
        self.pointer = pointer
        self.writes += 1


class InMemoryMetadataStore:
    def __init__(self, journal_partitions: int = 1) -> None:
        self.cluster_id = uuid.uuid4().hex
        self.data_dir_id = uuid.uuid4().hex
        self.journal_partitions = journal_partitions
        self.stored: dict[str, TopicMeta] = {}
        self.pointers: dict[int, InMemoryPointer] = {}

    def topics(self) -> Mapping[str, TopicMeta]:
        return MappingProxyType(self.stored)

    def get_topic(self, name: str) -> TopicMeta:
        if name not in self.stored:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return self.stored[name]

    def add_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, str],
        *,
        replication_factor: int = 1,
    ) -> TopicMeta:
        validate_topic_name(name)
        if name in self.stored:
            raise TopicExistsError(f"topic {name!r} exists already")
        topic = TopicMeta(partitions, dict(config), version=0)
        self.stored[name] = topic
        return topic

    def remove_topic(self, name: str) -> None:
        self.get_topic(name)
        del self.stored[name]

    def checkpoint_pointers(
        self, journal_partition: int, coordinator_epoch: int = 0
    ) -> InMemoryPointer:
        return self.pointers.setdefault(journal_partition, InMemoryPointer())


class InMemoryIdSource:
    """Blocks as Kafka's ProducerIdManager takes them; ``reserved`` is the shared counter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reserved = dict.fromkeys(("producer_id", "transaction_id"), 1)  # next block start
        self._next: dict[str, int] = {}
        self._block_end: dict[str, int] = {}
        self.blocks_taken = 0

    def next(self, kind: str) -> int:
        with self._lock:
            value = self._next.get(kind, 0)
            if value >= self._block_end.get(kind, 0):
                value = self.reserved[kind]
                self.reserved[kind] = value + BLOCK_SIZE
                self._block_end[kind] = value + BLOCK_SIZE
                self.blocks_taken += 1
            self._next[kind] = value + 1
            return value

    def peek(self, kind: str) -> int:
        with self._lock:
            value = self._next.get(kind, 0)
            return value if value < self._block_end.get(kind, 0) else self.reserved[kind]

    def restart(self) -> InMemoryIdSource:
        """A new process on the same shared counter: the unused rest of a block is lost."""
        fresh = InMemoryIdSource()
        fresh.reserved = self.reserved
        return fresh
