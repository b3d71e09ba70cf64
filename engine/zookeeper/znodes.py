"""The znodes a twinlog cluster keeps below its chroot (CLUSTER.md §3.2), and their JSON.

    /cluster_id                  {"cluster_id": hex32, "journal_partitions": int}
    /topics/<topic>              {"id": hex32, "partitions": int, "config": {key: str},
                                  "replication_factor": int (absent in older znodes: 1)}
    /coordinators/<N>            {"coordinator_epoch": int, "checkpoint_offset": int,
                                  "replay_from_offset": int}
    /id_blocks/<kind>            {"next_block_start": int}
    /brokers/ids/<id>            EPHEMERAL {"host": str, "port": int, "data_dir_id": hex32};
                                 its czxid is the broker epoch (KIP-380)
    /brokers/shutting_down/<id>  EPHEMERAL, empty: the broker asks for a controlled shutdown
    /controller                  EPHEMERAL {"broker_id": int, "controller_epoch": int}
    /controller_epoch            {"controller_epoch": int}; its zkVersion fences the controller
    /topics/<topic>/partitions/<p>/state
                                 {"leader", "leader_epoch", "isr": [[id, broker_epoch]...],
                                  "replicas", "controller_epoch"} (``partition_state``)
    /admin/preferred_replica_election
                                 {"partitions": [[topic, partition]...]}: asked of the
                                 controller, deleted once carried out (``preferred_election``)
    /config/users/<user>         {"version": 1, "config": {key: str}}: a user's settings, as
                                 Kafka keeps them (its SCRAM credentials: ``user_configs``);
                                 <user> is the name escaped as Kafka's Sanitizer does
    /config/acls                 {"version": 1, "acls": [{...}...]}: the grants made at run
                                 time (``acl_znode``), watched by every broker

``cluster_id`` and ``journal_partitions`` share one znode so that a cluster is created
by one write: there is never a cluster with an id but no partition count. Every value
is compact JSON in UTF-8; a znode that does not parse stops the caller with the path
named (CorruptJournalError), as a damaged local file does.
"""

from __future__ import annotations

import json
from typing import Any

from twinlog.engine.base.errors import CorruptJournalError

CLUSTER_ID = "/cluster_id"
TOPICS = "/topics"
COORDINATORS = "/coordinators"
ID_BLOCKS = "/id_blocks"
PARENTS = (TOPICS, COORDINATORS, ID_BLOCKS)
BROKER_IDS = "/brokers/ids"
SHUTTING_DOWN = "/brokers/shutting_down"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"  # Kafka's path for the same
CONFIG = "/config"
USER_CONFIGS = "/config/users"  # Kafka's path for the same
ACLS = "/config/acls"
# The names a twinlog cluster may have directly below its chroot: anything else there is
# another application's, and a broker refuses to join (``join_check``). Every path
# above must start with one of these.
TOP_LEVEL = frozenset(
    path.split("/")[1]
    for path in (
        CLUSTER_ID,
        TOPICS,
        COORDINATORS,
        ID_BLOCKS,
        BROKER_IDS,
        SHUTTING_DOWN,
        CONTROLLER,
        CONTROLLER_EPOCH,
        ADMIN,
        CONFIG,
    )
)


def topic_path(name: str) -> str:
    return f"{TOPICS}/{name}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def shutting_down_path(broker_id: int) -> str:
    return f"{SHUTTING_DOWN}/{broker_id}"


def coordinator_path(journal_partition: int) -> str:
    return f"{COORDINATORS}/{journal_partition}"


def id_block_path(kind: str) -> str:
    return f"{ID_BLOCKS}/{kind}"


def encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def decode(path: str, data: bytes, keys: tuple[str, ...]) -> dict[str, Any]:
    """The JSON object of znode ``path``, checked to have ``keys``."""
    try:
        value = json.loads(data)
        if not isinstance(value, dict):
            raise TypeError(f"a JSON {type(value).__name__}, not an object")
        missing = [key for key in keys if key not in value]
        if missing:
            raise KeyError(f"no {', '.join(missing)}")
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptJournalError(
            f"ZooKeeper znode {path} does not hold what twinlog wrote there ({error}): "
            f"{data[:200]!r}. Was it changed by hand? Restore it, or point the broker at "
            "another chroot."
        ) from None
    return value
