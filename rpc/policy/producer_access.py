"""Who may use, and who may see, a producer id (Kafka's TransactionalId ACLs).

Transaction requests carry a producer id, not the transactional id the ACL file
names. So do idempotent batches, whose producer id the broker issued to the
principal that asked for it (``twinlog.engine.broker.producer_owner``): a batch
carrying a producer id must come from a principal that may use that id, whether
it is transactional or not, or anyone who read the id off a fetched batch header
could write its next sequence first (the owner's next record would then be
acknowledged as a duplicate and never stored) or fence it with a newer generation.

The broker knows which transactional id (and owner) each producer id was issued
for, on disk, so the server asks it on every call instead of remembering who called
InitProducer: the answer survives a server restart (after which a producer goes
on with the id and generation it has, without a new init) and costs one dict
lookup under the coordinator's lock.

Thread rule: immutable; called from every server worker thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Protocol, TypeVar, runtime_checkable

from twinlog.engine.base.errors import (
    AuthorizationError,
    InvalidConfigError,
    UnknownProducerIdError,
)
from twinlog.engine.base.types import (
    ProducerDescription,
    ProducerIdentity,
    TransactionDescription,
)
from twinlog.engine.broker.producer_owner import is_idempotent, owner_of
from twinlog.engine.records.batch_format import NO_PRODUCER_ID, read_header
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.policy.auth import Guard, Operation, Principal, Resource
from twinlog.rpc.wire.broker_api import BrokerApi

# An idempotent producer id is initialised once (each InitProducer without a transactional
# id makes a new one), so generation 0 is the only one its owner was given.
IDEMPOTENT_GENERATION = 0

Described = TypeVar("Described", TransactionDescription, ProducerDescription)


@runtime_checkable
class ProducerDirectory(Protocol):
    """What the server needs of a broker to check transactional-id ACLs."""

    def transactional_id_of(self, producer_id: int) -> str | None:
        """The transactional id ``producer_id`` was issued for; None when unknown."""
        ...

    def init_producer(
        self,
        transactional_id: str | None = None,
        transaction_timeout_ms: int | None = None,
        owner: str | None = None,
    ) -> ProducerIdentity:
        """As BrokerApi's, recording ``owner`` with a new idempotent producer id."""
        ...


class TransactionalAccess:
    def __init__(self, guard: Guard, broker: BrokerApi) -> None:
        self.guard = guard
        self.broker = broker
        self.directory = broker if isinstance(broker, ProducerDirectory) else None
        if guard.acl is not None and self.directory is None:
            raise InvalidConfigError(
                f"an ACL file needs a broker that can name a producer's transactional id and "
                f"owner ({type(broker).__name__} lacks transactional_id_of or init_producer's "
                "owner); serve an twinlog.Broker"
            )

    @property
    def enforced(self) -> bool:
        return self.guard.acl is not None

    def init_producer(
        self, principal: Principal, transactional_id: str | None, timeout_ms: int | None
    ) -> ProducerIdentity:
        """InitProducer: a transactional id needs WRITE on it; an idempotent producer id is
        given to ``principal`` (recorded with it by the broker, on disk)."""
        if transactional_id:
            self.require_use(principal, transactional_id)
        if not self.enforced:
            return self.broker.init_producer(transactional_id, timeout_ms)
        assert self.directory is not None
        owner = None if transactional_id else principal.name
        return self.directory.init_producer(transactional_id, timeout_ms, owner=owner)

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
        self._require_user(principal, producer_id, transactional_id)

    def _require_user(self, principal: Principal, producer_id: int, transactional_id: str) -> None:
        """May ``principal`` act for ``producer_id``, issued for ``transactional_id``?"""
        if is_idempotent(transactional_id):
            # No ACL grant names these ids: only the principal that was given one may use it.
            if owner_of(transactional_id) != principal.name:
                raise self._not_given(principal, producer_id)
            return
        if not self.guard.may_describe_transactional_id(principal, transactional_id):
            # Not named: a principal that may not see the id must not learn it either.
            audit(
                "acl.denied",
                principal=principal.name,
                action="write",
                resource="producer id",
                name=producer_id,
            )
            raise AuthorizationError(
                f"principal {principal.name!r} may not write the transactional id of producer "
                f"{producer_id}; nothing was changed. Use a producer initialised with a "
                "transactional id you have a 'write transactional-id:...' grant for"
            )
        self.require_use(principal, transactional_id)  # names the id and the grant it needs

    def require_batch(self, principal: Principal, batch: bytes) -> None:
        """A batch carrying a producer id: a transactional one joins its producer's
        transaction (as ``require_producer``); an idempotent one is checked against its
        producer's sequences, so its id and generation must be ones the caller was given."""
        if not self.enforced:
            return
        header = read_header(batch)  # CorruptBatchError, as the broker would answer
        if header.is_transactional:
            self.require_producer(principal, header.producer_id)
            return
        if header.producer_id == NO_PRODUCER_ID:
            return
        assert self.directory is not None
        transactional_id = self.directory.transactional_id_of(header.producer_id)
        if transactional_id is None:  # never issued: nobody was given it
            raise self._not_given(principal, header.producer_id)
        if is_idempotent(transactional_id) and header.producer_generation != IDEMPOTENT_GENERATION:
            raise self._not_given(principal, header.producer_id, header.producer_generation)
        self._require_user(principal, header.producer_id, transactional_id)

    @staticmethod
    def _not_given(
        principal: Principal, producer_id: int, generation: int | None = None
    ) -> AuthorizationError:
        audit(
            "acl.denied",
            principal=principal.name,
            action="use",
            resource="producer id",
            name=producer_id,
            reason="not given to this principal",
        )
        what = f"producer id {producer_id}" + (
            "" if generation is None else f" with generation {generation}"
        )
        return AuthorizationError(
            f"{what} was not given to principal {principal.name!r} (InitProducer gives each "
            "principal its own; ids issued without authentication carry no owner); nothing was "
            "changed. Send with the producer id and generation your own init_producer() "
            "returned (a Producer does this itself)"
        )

    def visible(self, principal: Principal, items: Iterable[Described]) -> list[Described]:
        """The transactions or producers whose transactional id ``principal`` may describe."""
        if not self.enforced:
            return list(items)
        shown: list[Described] = []
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

    def groups_shown(
        self, principal: Principal, item: TransactionDescription
    ) -> TransactionDescription:
        """A listed transaction names only the groups ``principal`` may describe."""
        groups = tuple(
            group
            for group in item.groups
            if self.guard.may_describe(principal, group, Resource.GROUP)
        )
        return item if groups == item.groups else dataclasses.replace(item, groups=groups)
