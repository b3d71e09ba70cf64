"""``LocalMetadataStore``: the ``MetadataStore`` of one broker, over its data directory's files.

    DATA_DIR/meta             topics, journal_partitions, cluster_id, data_dir_id
                              (``twinlog.engine.broker.topic_registry``)
    DATA_DIR/logs/__txn_journal-N/checkpoint
                              coordinator N's checkpoint pointer, beside the journal
                              partition it points into
                              (``twinlog.journal.txn_checkpoint_pointer``)

On one node the cluster is the data directory, so ``cluster_id`` is given with it
like ``data_dir_id``; both are written at the first open that lacks them. The
replication factor is not kept (the sole member refuses one above 1 before it comes here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.broker.topic_registry import TopicMeta, TopicRegistry
from twinlog.journal.txn_checkpoint_pointer import LocalCheckpointPointerFile

META_FILE = "meta"
CHECKPOINT_POINTER_FILE = "checkpoint"  # in the journal partition's directory


class LocalMetadataStore:
    def __init__(self, data_dir: str | os.PathLike[str], journal_partitions: int) -> None:
        """Open ``DATA_DIR/meta`` (created with ``journal_partitions`` if missing)."""
        self.data_dir = Path(data_dir)
        self._registry = TopicRegistry(self.data_dir / META_FILE, journal_partitions)
        self._registry.ensure_identity()

    @property
    def cluster_id(self) -> str:
        return self._registry.cluster_id

    @property
    def data_dir_id(self) -> str:
        return self._registry.data_dir_id

    @property
    def journal_partitions(self) -> int:
        return self._registry.journal_partitions

    def topics(self) -> Mapping[str, TopicMeta]:
        return MappingProxyType(self._registry.topics)

    def get_topic(self, name: str) -> TopicMeta:
        return self._registry.get(name)

    def add_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, str],
        *,
        replication_factor: int = 1,
    ) -> TopicMeta:
        return self._registry.add(name, partitions, config)

    def grow_topic(self, name: str, partitions: int) -> TopicMeta:
        return self._registry.grow(name, partitions)

    def set_topic_config(self, name: str, config: Mapping[str, str]) -> TopicMeta:
        return self._registry.set_config(name, config)

    def remove_topic(self, name: str) -> None:
        self._registry.remove(name)

    def checkpoint_pointers(
        self, journal_partition: int, coordinator_epoch: int = 0
    ) -> LocalCheckpointPointerFile:
        return self.local_checkpoint_pointers(self.data_dir, journal_partition)

    @staticmethod
    def local_checkpoint_pointers(
        data_dir: Path, journal_partition: int
    ) -> LocalCheckpointPointerFile:
        """The pointer file of coordinator ``journal_partition`` in ``data_dir``."""
        return LocalCheckpointPointerFile(
            data_dir
            / "logs"
            / str(TopicPartition(TXN_JOURNAL_TOPIC, journal_partition))
            / CHECKPOINT_POINTER_FILE
        )
