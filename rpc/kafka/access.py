"""Who is calling on a connection, and may they: SASL/PLAIN onto twinlog's tokens, and the
gRPC server's ACLs (``twinlog.rpc.policy.auth``) on every request.

A connection starts as the anonymous principal. With a tokens file, it must authenticate
first (SaslHandshake, then SaslAuthenticate with mechanism PLAIN: the user name is the
principal, the password its token); any other request before that closes the connection
with a log line, as a Kafka broker does. With an ACL file, each request is checked as its
gRPC counterpart is: READ on the topics fetched, listed or whose offsets are committed,
WRITE on the topics produced to, READ on the group of offsets and membership calls, and a
producer id only for the principal that may use it (``TransactionalAccess``: WRITE on its
transactional id, or the idempotent producer id given to this principal). A denial is
answered TOPIC_, GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED where it applies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from twinlog.engine.base.errors import AuthorizationError
from twinlog.rpc.kafka.error_codes import AUTHORIZATION_FAILED_CODES, NONE
from twinlog.rpc.policy.auth import ANONYMOUS, Guard, Operation, Principal, Resource


@dataclass
class ConnectionState:
    """One connection's principal and where it is in SASL (its own thread only)."""

    principal: Principal
    authenticated: bool  # True from the start when the server has no tokens file
    mechanism: str | None = None  # chosen by SaslHandshake
    # SaslHandshake v0 chose PLAIN: the next frame is PLAIN's message itself, outside the
    # framing of requests, answered by an empty frame (Kafka before KIP-152).
    unframed_sasl_next: bool = False
    # A SCRAM login under way (``policy.scram.ServerExchange``) between its two messages.
    scram: Any = None
    # Why the connection is closed once this request is answered (or, with acks=0, not
    # answered): a failed authentication, a refused acks=0 produce. None: it goes on.
    close_after_answer: str | None = None
    peer: str = "-"  # the client's address, for the audit log


def new_connection(guard: Guard, peer: str = "-") -> ConnectionState:
    return ConnectionState(Principal(ANONYMOUS), authenticated=guard.tokens is None, peer=peer)


class ResourceDenied(AuthorizationError):
    """A denied ACL check, naming the kind of resource (error_codes picks the Kafka code)."""

    def __init__(self, message: str, resource: Resource) -> None:
        super().__init__(message)
        self.resource = resource.value


def require(
    guard: Guard,
    principal: Principal,
    operation: Operation,
    names: Iterable[str],
    resource: Resource = Resource.TOPIC,
) -> None:
    """Raise ResourceDenied unless ``principal`` may (the denial is audited)."""
    try:
        guard.require(principal, operation, names, resource)
    except AuthorizationError as error:
        raise ResourceDenied(str(error), resource) from None


def may(
    guard: Guard, principal: Principal, operation: Operation, name: str, resource: Resource
) -> bool:
    """A quiet check, for filtering what is listed (a denial here is not audited)."""
    return guard.acl is None or guard.acl.allows(principal, operation, name, resource)


def authorize(
    guard: Guard,
    principal: Principal,
    operation: Operation,
    names: Iterable[str],
    resource: Resource = Resource.TOPIC,
) -> int:
    """NONE, or the Kafka code for this kind of resource (the denial is audited)."""
    try:
        guard.require(principal, operation, names, resource)
    except AuthorizationError:
        return AUTHORIZATION_FAILED_CODES[resource.value]
    return NONE
