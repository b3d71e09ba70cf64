"""``ZooKeeperMetadataStore``: the ``MetadataStore`` of a cluster, in ZooKeeper.

The znodes are ``twinlog.engine.zookeeper.znodes``'s (CLUSTER.md §3.2). The first
store to open an empty chroot creates the cluster by one create of ``cluster_id`` (a
random id, and ``journal_partitions`` fixed for the cluster's life); every later
store, on any broker, reads it. The parents ``topics``, ``coordinators`` and
``id_blocks`` are made by whoever needs them first (creating them is idempotent).
``data_dir_id`` names the disk, so it stays a local file beside the data
(``twinlog.engine.zookeeper.data_dir_identity``), which also refuses a data directory
of another cluster.

Opening a store only reads until the chroot is known to be this broker's to join
(``join_check``: no other application's znodes, ACLs this session may use, the
cluster the data directory was claimed for): a refused broker has written nothing.

Topics are created, never overwritten: ``add_topic`` is a ZooKeeper create, and the
broker that loses a race for a name gets TopicExistsError. A topic's ``version`` is
its znode's zkVersion, for conditional changes later. Reads go to ZooKeeper each
time (no cache yet: watches come with the controller).

Thread rule: the broker serialises changes; reads may race harmlessly. Every call
waits at most the session's request timeout (ZooKeeperUnavailableError).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from twinlog.engine.base.errors import (
    ConditionalWriteLostError,
    CorruptJournalError,
    InvalidConfigError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.broker.topic_registry import (
    PARTITIONS_MAX,
    TopicMeta,
    check_growth,
    validate_topic_name,
)
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.checkpoint_pointer import ZooKeeperCheckpointPointer
from twinlog.engine.zookeeper.data_dir_identity import (
    claim_data_dir,
    recorded_cluster_id,
    refuse_other_cluster,
)
from twinlog.engine.zookeeper.join_check import CLUSTER_KEYS, read_cluster_before_join
from twinlog.engine.zookeeper.session import ZooKeeperSession

TOPIC_KEYS = ("id", "partitions", "config")


class ZooKeeperMetadataStore:
    def __init__(
        self,
        session: ZooKeeperSession,
        data_dir: str | os.PathLike[str],
        journal_partitions: int,
    ) -> None:
        """Join the cluster below the session's chroot, creating it (with
        ``journal_partitions``) if the chroot holds none; claim ``data_dir`` for it.

        InvalidConfigError, before anything is written, for a chroot that is not this
        broker's to join (``join_check``) or a data directory of another cluster."""
        self.session = session
        recorded = recorded_cluster_id(data_dir)
        found = read_cluster_before_join(session)
        if recorded is not None:
            where = f"ZooKeeper {session.connect}"
            refuse_other_cluster(
                data_dir, recorded, None if found is None else found["cluster_id"], where
            )
        cluster = self._create_or_read_cluster(journal_partitions) if found is None else found
        self._ensure_parents()
        self._cluster_id = str(cluster["cluster_id"])
        self._journal_partitions = cluster["journal_partitions"]
        if not isinstance(self._journal_partitions, int) or self._journal_partitions < 1:
            raise CorruptJournalError(
                f"ZooKeeper znode {znodes.CLUSTER_ID}: journal_partitions is "
                f"{self._journal_partitions!r}, expected a count of 1 or more"
            )
        self._data_dir_id = claim_data_dir(data_dir, self._cluster_id)

    def _create_or_read_cluster(self, journal_partitions: int) -> dict[str, Any]:
        client = self.session.client
        cluster = {"cluster_id": uuid.uuid4().hex, "journal_partitions": journal_partitions}
        try:
            self.session.wait(client.create_async(znodes.CLUSTER_ID, znodes.encode(cluster)))
        except NodeExistsError:  # the cluster exists (another broker may have just made it)
            data, _ = self.session.wait(client.get_async(znodes.CLUSTER_ID))
            cluster = znodes.decode(znodes.CLUSTER_ID, data, CLUSTER_KEYS)
        return cluster

    def _ensure_parents(self) -> None:
        for parent in znodes.PARENTS:  # idempotent: whoever comes first creates them
            self.session.wait(self.session.client.ensure_path_async(parent))

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def data_dir_id(self) -> str:
        return self._data_dir_id

    @property
    def journal_partitions(self) -> int:
        return self._journal_partitions

    def topics(self) -> Mapping[str, TopicMeta]:
        client = self.session.client
        names = self.session.wait(client.get_children_async(znodes.TOPICS))
        # One round trip for all of them: the requests are pipelined on the connection.
        pending = {name: client.get_async(znodes.topic_path(name)) for name in names}
        found: dict[str, TopicMeta] = {}
        for name, request in pending.items():
            try:
                data, stat = self.session.wait(request)
            except NoNodeError:
                continue  # deleted since the listing
            found[name] = self._topic(name, data, stat.version)
        return MappingProxyType(found)

    def get_topic(self, name: str) -> TopicMeta:
        validate_topic_name(name)  # a name with "/" would address another znode
        try:
            data, stat = self.session.wait(self.session.client.get_async(znodes.topic_path(name)))
        except NoNodeError:
            raise UnknownTopicOrPartitionError(
                f"topic {name!r} does not exist; create it first (twinlog topics create {name})"
            ) from None
        return self._topic(name, data, stat.version)

    def add_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, str],
        *,
        replication_factor: int = 1,
    ) -> TopicMeta:
        """Create the topic znode; the controller then creates its partitions' states.

        A ``replication_factor`` above the number of live (registered) brokers is refused,
        as Kafka refuses it; a factor of 1 is always accepted, so that a topic can be made
        before any broker registered (the controller creates its state when one does)."""
        validate_topic_name(name)
        if not isinstance(partitions, int) or not 1 <= partitions <= PARTITIONS_MAX:
            raise InvalidConfigError(
                f"topic {name!r}: partitions is {partitions!r}, expected 1..{PARTITIONS_MAX}"
            )
        self._check_replication_factor(name, replication_factor)
        topic = TopicMeta(partitions, {str(key): str(value) for key, value in config.items()})
        value = {
            "id": topic.topic_id,
            "partitions": topic.partitions,
            "config": topic.config,
            "replication_factor": replication_factor,
        }
        try:
            self.session.wait(
                self.session.client.create_async(znodes.topic_path(name), znodes.encode(value))
            )
        except NodeExistsError:
            raise TopicExistsError(f"topic {name!r} exists already") from None
        return topic  # version 0: a new znode's

    def _check_replication_factor(self, name: str, replication_factor: int) -> None:
        if (
            not isinstance(replication_factor, int)
            or isinstance(replication_factor, bool)
            or replication_factor < 1
        ):
            raise InvalidConfigError(
                f"topic {name!r}: replication_factor is {replication_factor!r}, expected an "
                "integer 1 or more"
            )
        if replication_factor == 1:
            return
        try:
            live = self.session.wait(self.session.client.get_children_async(znodes.BROKER_IDS))
        except NoNodeError:
            live = []
        if replication_factor > len(live):
            raise InvalidConfigError(
                f"topic {name!r}: replication factor {replication_factor} is larger than the "
                f"{len(live)} live brokers; start more brokers or choose a smaller factor"
            )

    def grow_topic(self, name: str, partitions: int) -> TopicMeta:
        """A conditional set of the topic znode (its other fields as they are); the
        controller creates the new partitions' states, as for a new topic."""

        def grown(value: dict[str, Any]) -> None:
            check_growth(name, int(value["partitions"]), partitions)
            value["partitions"] = partitions

        return self._change_topic(name, grown, "its partitions were being added")

    def set_topic_config(self, name: str, config: Mapping[str, str]) -> TopicMeta:
        """A conditional set of the topic znode's ``config`` (its other fields as they are);
        every broker's watch (``topic_config_watch``) applies it to its replicas."""

        def configured(value: dict[str, Any]) -> None:
            value["config"] = {str(key): str(item) for key, item in config.items()}

        return self._change_topic(name, configured, "its settings were being changed")

    def _change_topic(
        self, name: str, change: Callable[[dict[str, Any]], None], doing: str
    ) -> TopicMeta:
        """Read the topic znode, ``change`` its value in place, write it back if it did not
        change meanwhile (ConditionalWriteLostError if it did: nothing was written)."""
        validate_topic_name(name)
        path = znodes.topic_path(name)
        client = self.session.client
        try:
            data, stat = self.session.wait(client.get_async(path))
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist") from None
        value = dict(znodes.decode(path, data, TOPIC_KEYS))
        change(value)
        encoded = znodes.encode(value)
        try:
            stat = self.session.wait(client.set_async(path, encoded, stat.version))
        except BadVersionError:
            raise ConditionalWriteLostError(
                f"topic {name!r} changed while {doing}; nothing was changed: retry"
            ) from None
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"topic {name!r} was deleted meanwhile") from None
        return self._topic(name, encoded, stat.version)

    def remove_topic(self, name: str) -> None:
        validate_topic_name(name)
        client = self.session.client
        try:
            self.session.wait(client.delete_async(znodes.topic_path(name)))
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist") from None
        except NotEmptyError:  # partition state znodes below it (once there is a controller)
            with self.session.translated_errors():
                client.delete(znodes.topic_path(name), recursive=True)

    def checkpoint_pointers(
        self, journal_partition: int, coordinator_epoch: int = 0
    ) -> ZooKeeperCheckpointPointer:
        if not 0 <= journal_partition < self._journal_partitions:
            raise InvalidConfigError(
                f"journal partition {journal_partition} is not within "
                f"0..{self._journal_partitions - 1}"
            )
        return ZooKeeperCheckpointPointer(self.session, journal_partition, coordinator_epoch)

    @staticmethod
    def _topic(name: str, data: bytes, version: int) -> TopicMeta:
        path = znodes.topic_path(name)
        value = znodes.decode(path, data, TOPIC_KEYS)
        return TopicMeta(int(value["partitions"]), dict(value["config"]), str(value["id"]), version)
