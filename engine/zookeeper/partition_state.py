"""A partition's leader, leader epoch, ISR and replicas: ``topics/<t>/partitions/<p>/state``.

    {"leader": broker id, or -1 while the partition is offline,
     "leader_epoch": int, +1 at every leader change the controller makes,
     "isr": [[broker_id, broker_epoch], ...],   the in-sync replicas (KIP-380 epochs)
     "replicas": [broker ids in assignment order],
     "controller_epoch": the epoch of the controller that wrote it last,
     "adding": [broker ids], "removing": [broker ids],   only while a reassignment runs
     "original": [broker ids in assignment order],        the same
     "throttle_bytes_per_s": int,                         the same; 0 or absent: none}

A reassignment (``reassignment``) moves a partition from its *original* replicas to its
*target* ones: while it runs, ``replicas`` is the target followed by the original
replicas not in it, ``adding`` the target replicas not in the original and ``removing``
the original ones not in the target (Kafka's KIP-455), and ``original`` the original
replicas in their order (a cancel restores it, preferred leader included). Invariants,
checked at construction (decode says a znode that breaks them is corrupt): ``adding``
and ``removing`` are disjoint subsets of ``replicas``, the target (``replicas`` minus
``removing``) is never empty, and ``original`` is ``replicas`` minus ``adding``.

The controller creates the znode and changes leaders (in multis fenced by the controller
epoch, ``controller_epoch``); a leader changes its ISR by a set conditional on the
zkVersion (``partition_roles.change_isr``). ``PartitionState.version`` is that zkVersion:
every write names the version it read, so no two writers interleave unseen.

An ISR member carries the broker epoch of the registration it was in sync under: a broker
that restarts registers again with a new epoch, and its old membership counts as dead
(KIP-903: a replica may join an ISR only with its current epoch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession

NO_LEADER = -1  # Kafka's LeaderAndIsr.NoLeader: the partition is offline
NEW = -1  # the version of a state not yet written
KEYS = ("leader", "leader_epoch", "isr", "replicas", "controller_epoch")


@dataclass(frozen=True)
class IsrMember:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[IsrMember, ...]
    replicas: tuple[int, ...]
    controller_epoch: int
    version: int = NEW  # the znode's zkVersion when read or written
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    original_order: tuple[int, ...] = ()  # the original replicas, while a reassignment runs
    throttle_bytes_per_s: int = 0

    def __post_init__(self) -> None:
        # The invariants above; a ValueError (decode says the znode is corrupt).
        replicas, adding, removing = set(self.replicas), set(self.adding), set(self.removing)
        if not (adding <= replicas and removing <= replicas) or adding & removing:
            raise ValueError(
                f"adding {list(self.adding)} and removing {list(self.removing)} must be "
                f"disjoint subsets of the replicas {list(self.replicas)}"
            )
        if self.replicas and removing == replicas:
            raise ValueError(f"removing every replica {list(self.replicas)} leaves none")
        if (adding or removing) and (
            len(self.original_order) != len(set(self.original_order))
            or set(self.original_order) != replicas - adding
        ):
            raise ValueError(
                f"the original replicas {list(self.original_order)} must be the replicas "
                f"{list(self.replicas)} but those being added {list(self.adding)}, each once"
            )

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas it is moving to (its replicas, when no reassignment runs)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        """The replicas it is moving from (its replicas, when no reassignment runs)."""
        return self.original_order if self.reassigning else self.replicas

    @property
    def offline(self) -> bool:
        return self.leader == NO_LEADER

    @property
    def isr_ids(self) -> tuple[int, ...]:
        return tuple(member.broker_id for member in self.isr)

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": [[member.broker_id, member.broker_epoch] for member in self.isr],
            "replicas": list(self.replicas),
            "controller_epoch": self.controller_epoch,
        }
        if self.reassigning:  # a state without a reassignment reads as it always did
            value["adding"] = list(self.adding)
            value["removing"] = list(self.removing)
            value["original"] = list(self.original_order)
            if self.throttle_bytes_per_s:
                value["throttle_bytes_per_s"] = self.throttle_bytes_per_s
        return znodes.encode(value)

    @classmethod
    def decode(cls, path: str, data: bytes, version: int) -> PartitionState:
        value = znodes.decode(path, data, KEYS)
        try:
            return cls(
                leader=_integer(value["leader"]),
                leader_epoch=_integer(value["leader_epoch"]),
                isr=tuple(IsrMember(_integer(i), _integer(e)) for i, e in value["isr"]),
                replicas=tuple(_integer(broker_id) for broker_id in value["replicas"]),
                controller_epoch=_integer(value["controller_epoch"]),
                version=version,
                adding=tuple(_integer(broker_id) for broker_id in value.get("adding", ())),
                removing=tuple(_integer(broker_id) for broker_id in value.get("removing", ())),
                original_order=tuple(_integer(b) for b in value.get("original", ())),
                throttle_bytes_per_s=_integer(value.get("throttle_bytes_per_s", 0)),
            )
        except (TypeError, ValueError) as error:
            raise CorruptJournalError(
                f"ZooKeeper znode {path} does not hold a partition state ({error}): {data[:200]!r}"
            ) from None

    def describe(self) -> str:
        """``leader 2 epoch 5 isr [2, 3]``, for logs and error messages."""
        text = f"leader {self.leader} epoch {self.leader_epoch} isr {list(self.isr_ids)}"
        if self.reassigning:
            text += f" moving {list(self.original)} -> {list(self.target)}"
        return text


def _integer(value: Any) -> int:
    # bool is an int to Python; a true or false here was not written by twinlog.
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer")
    return value


def read_partition_state(
    session: ZooKeeperSession, topic: str, partition: int
) -> PartitionState | None:
    """The state of ``topic``-``partition``, or None when the controller has not created it."""
    path = znodes.partition_state_path(topic, partition)
    try:
        data, stat = session.wait(session.client.get_async(path))
    except NoNodeError:
        return None
    return PartitionState.decode(path, data, stat.version)


def read_topic_partition_states(
    session: ZooKeeperSession,
    topic: str,
    watch: Callable[[WatchedEvent], None] | None = None,
) -> dict[int, PartitionState]:
    """Every partition state of ``topic`` there is (none for a topic still without states).
    ``watch`` (kazoo's thread: must not block) is set on the listing and on each state."""
    client = session.client
    try:
        children = session.wait(client.get_children_async(znodes.partitions_path(topic), watch))
    except NoNodeError:
        return {}
    partitions = sorted(int(child) for child in children if child.isdigit())
    # Pipelined: one round trip for the lot.
    pending = {
        partition: client.get_async(znodes.partition_state_path(topic, partition), watch)
        for partition in partitions
    }
    states: dict[int, PartitionState] = {}
    for partition, request in pending.items():
        path = znodes.partition_state_path(topic, partition)
        try:
            data, stat = session.wait(request)
        except NoNodeError:
            continue  # the topic is being deleted
        states[partition] = PartitionState.decode(path, data, stat.version)
    return states
