"""Authentication (bearer tokens, or mutual-TLS certificates) and per-principal ACLs.

Tokens file (``--tokens-file``), one token per line, ``#`` comments::

    # token                              principal
    9c1d0a4e5f0b4e7c8a2d3f6e1b7c9d05     alice
    3e8f2a9b7c6d5e4f3a2b1c0d9e8f7a6b     ops

ACL file (``--acl-file``), one grant per line; the pattern is a shell-style glob
(``orders.*``, ``*``) over topic names, or over transactional ids for ``abort``;
principal ``*`` means every authenticated principal; ``all`` grants every operation::

    # principal  operation  pattern
    alice        write      orders*
    alice        read       *
    ops          create     *
    ops          delete     *
    ops          abort      *

Without an ACL file every authenticated principal may do everything. Describing
(listing topics, transactions and producers) needs authentication only.

Tokens are compared with ``hmac.compare_digest`` against every known token (no
early exit, no dict lookup on the secret), and are never logged or put in an
error message.
"""

from __future__ import annotations

import fnmatch
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from engine.errors import AuthenticationError, AuthorizationError, InvalidConfigError

AUTHORIZATION_KEY = "authorization"
BEARER_PREFIX = "bearer "
TOKEN_BYTES_MIN = 16
ANONYMOUS = "anonymous"


class Operation(Enum):
    READ = "read"  # fetch, list offsets, group offsets of a topic
    WRITE = "write"  # produce to a topic, add it to a transaction
    CREATE = "create"  # create a topic
    DELETE = "delete"  # delete a topic
    ABORT = "abort"  # abort another producer's transaction (admin)


ALL_OPERATIONS = "all"


@dataclass(frozen=True)
class Principal:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Grant:
    principal: str
    operation: str
    pattern: str

    def allows(self, principal: Principal, operation: Operation, resource: str) -> bool:
        return (
            self.principal in ("*", principal.name)
            and self.operation in (ALL_OPERATIONS, operation.value)
            and fnmatch.fnmatchcase(resource, self.pattern)
        )


def _lines(path: str | Path, what: str) -> list[tuple[int, list[str]]]:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise InvalidConfigError(f"cannot read {what} {path}: {error.strerror}") from None
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if words:
            found.append((number, words))
    return found


class TokenTable:
    """Bearer tokens to principals. Thread rule: immutable; any thread."""

    def __init__(self, tokens: Iterable[tuple[str, str]]) -> None:
        self._tokens = [(token.encode(), Principal(name)) for token, name in tokens]

    @classmethod
    def load(cls, path: str | Path) -> TokenTable:
        pairs = []
        for number, words in _lines(path, "tokens file"):
            if len(words) != 2:
                raise InvalidConfigError(
                    f"tokens file {path} line {number}: expected 'TOKEN PRINCIPAL', "
                    f"found {len(words)} words"
                )
            if len(words[0]) < TOKEN_BYTES_MIN:
                raise InvalidConfigError(
                    f"tokens file {path} line {number}: the token of {words[1]!r} is shorter "
                    f"than {TOKEN_BYTES_MIN} characters; generate one with "
                    "'python -c \"import secrets; print(secrets.token_hex(16))\"'"
                )
            pairs.append((words[0], words[1]))
        if not pairs:
            raise InvalidConfigError(f"tokens file {path} holds no token")
        return cls(pairs)

    def __len__(self) -> int:
        return len(self._tokens)

    def principal_of(self, token: str) -> Principal | None:
        presented = token.encode()
        found: Principal | None = None
        for known, principal in self._tokens:  # every token, whatever matched: constant time
            if hmac.compare_digest(known, presented):
                found = principal
        return found


class Acl:
    """Grants per principal. Thread rule: immutable; any thread."""

    def __init__(self, grants: Sequence[Grant]) -> None:
        self.grants = tuple(grants)

    @classmethod
    def load(cls, path: str | Path) -> Acl:
        known = {operation.value for operation in Operation} | {ALL_OPERATIONS}
        grants = []
        for number, words in _lines(path, "ACL file"):
            if len(words) != 3:
                raise InvalidConfigError(
                    f"ACL file {path} line {number}: expected 'PRINCIPAL OPERATION PATTERN'"
                )
            principal, operation, pattern = words
            if operation.lower() not in known:
                raise InvalidConfigError(
                    f"ACL file {path} line {number}: operation {operation!r} is not one of "
                    f"{', '.join(sorted(known))}"
                )
            grants.append(Grant(principal, operation.lower(), pattern))
        return cls(grants)

    def allows(self, principal: Principal, operation: Operation, resource: str) -> bool:
        return any(grant.allows(principal, operation, resource) for grant in self.grants)


class Guard:
    """Who is calling, and may they? ``None`` parts switch that check off.

    Thread rule: immutable; called from every server worker thread.
    """

    def __init__(self, tokens: TokenTable | None, acl: Acl | None, mutual_tls: bool) -> None:
        self.tokens = tokens
        self.acl = acl
        self.mutual_tls = mutual_tls

    def authenticate(
        self, metadata: Iterable[tuple[str, str | bytes]], peer_common_name: str | None
    ) -> Principal:
        if self.tokens is None:
            if self.mutual_tls and peer_common_name:
                return Principal(peer_common_name)
            return Principal(ANONYMOUS)
        header = None
        for key, value in metadata:
            if key == AUTHORIZATION_KEY:
                header = value.decode() if isinstance(value, bytes) else value
        if header is None:
            raise AuthenticationError(
                "this server requires a bearer token and the request carried none; "
                "pass token=... to the client (--token or TWINLOG_TOKEN on the command line)"
            )
        if not header.lower().startswith(BEARER_PREFIX):
            raise AuthenticationError(
                "the authorization metadata must read 'Bearer TOKEN'; pass token=... to the client"
            )
        principal = self.tokens.principal_of(header[len(BEARER_PREFIX) :].strip())
        if principal is None:
            raise AuthenticationError(
                "the bearer token is not known to this server (the token itself is not "
                "logged); check the token, or ask an operator to add it to the tokens file"
            )
        return principal

    def require(self, principal: Principal, operation: Operation, resources: Iterable[str]) -> None:
        """Raise AuthorizationError unless ``principal`` may do ``operation`` on every resource."""
        if self.acl is None:
            return
        for resource in resources:
            if not self.acl.allows(principal, operation, resource):
                raise AuthorizationError(
                    f"principal {principal.name!r} may not {operation.value} {resource!r}; "
                    f"nothing was changed. Ask an operator for a grant in the ACL file "
                    f"('{principal.name} {operation.value} {resource}')"
                )
