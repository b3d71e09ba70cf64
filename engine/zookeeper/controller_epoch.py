"""Controller election and the controller-epoch fence (KAFKA-6082).

    controller          EPHEMERAL {"broker_id": int, "controller_epoch": int}
    controller_epoch    {"controller_epoch": int}, persistent

``try_to_become_controller`` is Kafka's registerControllerAndIncrementControllerEpoch:
one multi creates the ephemeral ``controller`` and sets ``controller_epoch`` to the next
epoch, conditional on the zkVersion read. Both or neither: there is never a controller
znode whose epoch was not taken, and of two brokers racing, one wins.

``FencedWriter.commit`` writes every controller change as a multi whose first operation
checks ``controller_epoch`` still has the zkVersion this controller wrote. A deposed
controller (its session expired and another broker won, while it still runs) writes
nothing: its multi fails as a whole with ControllerFencedError, and it must step down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kazoo.exceptions import (
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)

from twinlog.engine.base.errors import ConditionalWriteLostError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession

CONTROLLER_KEYS = ("broker_id", "controller_epoch")
EPOCH_KEYS = ("controller_epoch",)
MULTI_OPS_MAX = 100  # well below ZooKeeper's 1 MiB request limit for state-sized values


class ControllerFencedError(ConditionalWriteLostError):
    """``controller_epoch`` moved: another broker is controller now; nothing was written."""


class StaleStateError(ConditionalWriteLostError):
    """A znode written by the multi changed since it was read (a leader changed its ISR,
    a topic was deleted); nothing was written: read again and decide again."""


@dataclass(frozen=True)
class ControllerSeat:
    """This broker is controller: ``epoch``, and the zkVersion of ``controller_epoch``
    that its writes check."""

    broker_id: int
    epoch: int
    epoch_version: int


@dataclass(frozen=True)
class Create:
    path: str
    data: bytes


@dataclass(frozen=True)
class SetData:
    path: str
    data: bytes
    version: int


@dataclass(frozen=True)
class Delete:
    path: str
    version: int  # -1: whatever its version


Op = Create | SetData | Delete


def read_controller(session: ZooKeeperSession) -> tuple[int, int, int] | None:
    """(broker_id, controller_epoch, owner session id) of the controller, or None."""
    try:
        data, stat = session.wait(session.client.get_async(znodes.CONTROLLER))
    except NoNodeError:
        return None
    value = znodes.decode(znodes.CONTROLLER, data, CONTROLLER_KEYS)
    return int(value["broker_id"]), int(value["controller_epoch"]), int(stat.ephemeralOwner)


def read_controller_epoch(session: ZooKeeperSession) -> tuple[int, int]:
    """(controller epoch, zkVersion of ``controller_epoch``), creating it at 0 if absent."""
    client = session.client
    try:
        session.wait(client.create_async(znodes.CONTROLLER_EPOCH, _epoch_value(0)))
    except NodeExistsError:
        pass
    data, stat = session.wait(client.get_async(znodes.CONTROLLER_EPOCH))
    value = znodes.decode(znodes.CONTROLLER_EPOCH, data, EPOCH_KEYS)
    return int(value["controller_epoch"]), stat.version


def try_to_become_controller(session: ZooKeeperSession, broker_id: int) -> ControllerSeat | None:
    """Win the election (a seat with the new epoch), or None: another broker holds it."""
    epoch, version = read_controller_epoch(session)
    transaction = session.client.transaction()
    value = znodes.encode({"broker_id": broker_id, "controller_epoch": epoch + 1})
    transaction.create(znodes.CONTROLLER, value, ephemeral=True)
    transaction.set_data(znodes.CONTROLLER_EPOCH, _epoch_value(epoch + 1), version)
    results = session.wait(transaction.commit_async())
    if _failure(results) is not None:
        return None  # NodeExists: a controller lives; BadVersion: one was just elected
    return ControllerSeat(broker_id, epoch + 1, results[1].version)


def resign(session: ZooKeeperSession, seat: ControllerSeat) -> None:
    """Delete ``controller`` if it is still this session's, so that the others race now
    rather than when the session ends. A znode of another broker is left alone."""
    holder = read_controller(session)
    if holder is None or holder[2] != session.client.client_id[0]:
        return
    try:
        session.wait(session.client.delete_async(znodes.CONTROLLER))
    except NoNodeError:
        pass


class FencedWriter:
    """Writes of the controller in ``seat``, each multi checked against its epoch."""

    def __init__(self, session: ZooKeeperSession, seat: ControllerSeat) -> None:
        self.session = session
        self.seat = seat

    def commit(self, ops: Sequence[Op]) -> list[object]:
        """Apply ``ops`` all or none; ControllerFencedError or StaleStateError if none."""
        transaction = self.session.client.transaction()
        transaction.check(znodes.CONTROLLER_EPOCH, self.seat.epoch_version)
        for op in ops:
            if isinstance(op, Create):
                transaction.create(op.path, op.data)
            elif isinstance(op, Delete):
                transaction.delete(op.path, op.version)
            else:
                transaction.set_data(op.path, op.data, op.version)
        results = self.session.wait(transaction.commit_async())
        failure = _failure(results)
        if failure is None:
            return list(results[1:])
        if failure == 0:
            raise ControllerFencedError(
                f"controller_epoch is no longer at the version controller {self.seat.broker_id} "
                f"(epoch {self.seat.epoch}) wrote: another broker is controller; nothing of "
                f"this write of {len(ops)} changes was applied"
            )
        op = ops[failure - 1]
        raise StaleStateError(
            f"ZooKeeper znode {op.path} changed since the controller read it "
            f"({type(results[failure]).__name__}); nothing of this write of {len(ops)} "
            "changes was applied"
        )


def chunks(groups: Sequence[Sequence[Op]], limit: int = MULTI_OPS_MAX) -> list[list[int]]:
    """The indexes of ``groups`` per multi: each group kept whole, as few multis of up to
    ``limit`` operations as they fit (ZooKeeper bounds a request at 1 MiB)."""
    found: list[list[int]] = []
    size = 0
    for index, group in enumerate(groups):
        if found and size + len(group) <= limit:
            found[-1].append(index)
            size += len(group)
        else:
            found.append([index])
            size = len(group)
    return found


def _failure(results: Sequence[object]) -> int | None:
    """The index of the operation that failed a multi, or None if it was applied.

    ZooKeeper answers every operation of a failed multi with an error: RolledBack before
    the one that failed, RuntimeInconsistency after it."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            return index
    return None


def _epoch_value(epoch: int) -> bytes:
    return znodes.encode({"controller_epoch": epoch})
