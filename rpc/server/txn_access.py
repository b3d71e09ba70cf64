"""Who may use, and who may see, a transactional id (Kafka's TransactionalId ACLs).

Transaction requests carry a producer id, not the transactional id the ACL file
names. The broker knows which transactional id each producer id was issued for,
on disk, so the server asks it on every call instead of remembering who called
InitProducer: the answer survives a server restart (after which a producer goes
on with the id and generation it has, without a new init) and costs one dict
lookup under the coordinator's lock.

Thread rule: immutable; called from every server worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar, runtime_checkable

from twinlog.engine.base.errors import (
    AuthorizationError,
    InvalidConfigError,
    UnknownProducerIdError,
)
from twinlog.engine.base.types import ProducerDescription, TransactionDescription
from twinlog.engine.records.batch_format import NO_TRANSACTION_ID, read_header
from twinlog.rpc.server.auth import Guard, Operation, Principal, Resource

Described = TypeVar("Described", TransactionDescription, ProducerDescription)


@runtime_checkable
class ProducerDirectory(Protocol):
    """What the server needs of a broker to check transactional-id ACLs."""

    def transactional_id_of(self, producer_id: int) -> str | None:
        """The transactional id ``producer_id`` was issued for; None when unknown."""
        ...


class TransactionalAccess:
    def __init__(self, guard: Guard, broker: object) -> None:
        self.guard = guard
        self.directory = broker if isinstance(broker, ProducerDirectory) else None
        if guard.acl is not None and self.directory is None:
            raise InvalidConfigError(
                f"an ACL file needs a broker that can name a producer's transactional id "
                f"({type(broker).__name__} has no transactional_id_of); serve an twinlog.Broker"
            )

    @property
    def enforced(self) -> bool:
        return self.guard.acl is not None

    def require_use(self, principal: Principal, transactional_id: str) -> None:
        """InitProducer with ``transactional_id``: WRITE on it (this also fences its owner)."""
        self.guard.require(
            principal, Operation.WRITE, (transactional_id,), Resource.TRANSACTIONAL_ID
        )

    def require_producer(self, principal: Principal, producer_id: int) -> None:
        """A request acting for ``producer_id`` (begin, add, offsets, commit, abort)."""
        if not self.enforced:
            return
        assert self.directory is not None
        transactional_id = self.directory.transactional_id_of(producer_id)
        if transactional_id is None:
            raise UnknownProducerIdError(
                f"producer id {producer_id} is not known to this server; call "
                "init_transactions() first"
            )
        if not self.guard.may_describe_transactional_id(principal, transactional_id):
            # Not named: a principal that may not see the id must not learn it either.
            raise AuthorizationError(
                f"principal {principal.name!r} may not write the transactional id of producer "
                f"{producer_id}; nothing was changed. Use a producer initialised with a "
                "transactional id you have a 'write transactional-id:...' grant for"
            )
        self.require_use(principal, transactional_id)  # names the id and the grant it needs

    def require_batch(self, principal: Principal, batch: bytes) -> None:
        """A transactional batch joins its producer's transaction: as ``require_producer``."""
        if not self.enforced:
            return
        header = read_header(batch)  # CorruptBatchError, as the broker would answer
        if header.transaction_id != NO_TRANSACTION_ID:
            self.require_producer(principal, header.producer_id)

    def visible(self, principal: Principal, items: Iterable[Described]) -> list[Described]:
        """The transactions or producers whose transactional id ``principal`` may describe."""
        if not self.enforced:
            return list(items)
        shown = []
        for item in items:
            if isinstance(item, TransactionDescription):
                transactional_id: str | None = item.transactional_id
            else:
                assert self.directory is not None
                transactional_id = self.directory.transactional_id_of(item.producer_id)
            if transactional_id is not None and self.guard.may_describe_transactional_id(
                principal, transactional_id
            ):
                shown.append(item)
        return shown
