"""SaslHandshake and SaslAuthenticate: mechanism PLAIN, onto twinlog's tokens file.

SaslHandshake v1 is followed by SaslAuthenticate carrying PLAIN's message; v0 (served for
clients that require it to be listed, as librdkafka 2.0 does for PLAIN) by the message as a
frame of its own, answered by an empty frame (``authenticate_unframed``, called by the
listener, which reads that frame).

PLAIN's message is ``authzid NUL user NUL password`` (RFC 4616): the user is the
principal and the password its token, which must be that principal's in the tokens file
(an authzid, if given, must be the user). A failed authentication is answered
SASL_AUTHENTICATION_FAILED with a reason that never quotes the password, then the
connection is closed; it is audited (``authentication.failed``, with the client's address,
the mechanism and the user named, never the password), as is a handshake asking for a
mechanism not offered. Without a tokens file every connection is already the anonymous
principal and a handshake is answered ILLEGAL_SASL_STATE (nothing to authenticate with).
"""

from __future__ import annotations

import logging

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    ILLEGAL_SASL_STATE,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
)
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.policy.auth import Principal

log = logging.getLogger("twinlog.kafka")

PLAIN = "PLAIN"
MECHANISMS = [PLAIN]
NO_SESSION_LIFETIME_MS = 0  # the session lasts as long as the connection
MECHANISM_CHARS_LOGGED = 32  # of a mechanism asked for and not offered (longer: cut)


def handle_sasl_handshake(
    request: SaslHandshakeRequest, version: int, context: KafkaContext
) -> SaslHandshakeResponse:
    connection = context.connection
    if context.guard.tokens is None or connection.authenticated:
        error_code = ILLEGAL_SASL_STATE
    elif request.mechanism != PLAIN:
        error_code = UNSUPPORTED_SASL_MECHANISM
        audit(
            "authentication.failed",
            peer=connection.peer,
            door="kafka",
            mechanism=str(request.mechanism)[:MECHANISM_CHARS_LOGGED],
            reason=f"mechanism not enabled: this listener offers {', '.join(MECHANISMS)}",
        )
    else:
        connection.mechanism = PLAIN
        connection.unframed_sasl_next = version == 0
        error_code = NONE
    return SaslHandshakeResponse(version=version, error_code=error_code, mechanisms=MECHANISMS)


def authenticate_unframed(auth_bytes: bytes, context: KafkaContext) -> bool:
    """After SaslHandshake v0: PLAIN's message as its own frame (no SaslAuthenticate
    around it). True once the connection is its principal's; False (logged) when it
    proves nothing: the caller closes the connection, as Kafka does for v0."""
    connection = context.connection
    assert connection.unframed_sasl_next and connection.mechanism == PLAIN
    connection.unframed_sasl_next = False
    return _authenticate(auth_bytes, context) is None


def _authenticate(auth_bytes: bytes, context: KafkaContext) -> str | None:
    """Make the connection the principal PLAIN's message proves; None, or why it cannot
    (logged, and the connection is closed after the answer)."""
    principal, user, reason = _proven(auth_bytes, context)
    if principal is None:
        log.warning("Kafka SASL/PLAIN authentication refused: %s", reason)
        audit(
            "authentication.failed",
            peer=context.connection.peer,
            door="kafka",
            mechanism=PLAIN,
            user=user,
            reason=reason,
        )
        context.connection.close_after_answer = "SASL authentication failed"
        return reason
    context.connection.principal = principal
    context.connection.authenticated = True
    return None


def _proven(auth_bytes: bytes, context: KafkaContext) -> tuple[Principal | None, str, str]:
    """The principal PLAIN's message proves, or None; the user it names (``-``: none); why
    not."""
    parts = auth_bytes.split(b"\x00")
    if len(parts) != 3:
        return None, "-", "a PLAIN message is authzid NUL user NUL password"
    authzid, user, password = (part.decode("utf-8", "replace") for part in parts)
    if authzid and authzid != user:
        return None, user, f"user {user!r} may not act as {authzid!r}"
    tokens = context.guard.tokens
    assert tokens is not None
    principal = tokens.principal_of(password)
    if principal is None or principal.name != user:
        return None, user, f"the password is not user {user!r}'s token in the tokens file"
    return principal, user, ""


def handle_sasl_authenticate(
    request: SaslAuthenticateRequest, version: int, context: KafkaContext
) -> SaslAuthenticateResponse:
    connection = context.connection
    if connection.mechanism != PLAIN or connection.authenticated:
        connection.close_after_answer = "SaslAuthenticate out of turn"
        return SaslAuthenticateResponse(
            version=version,
            error_code=ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate comes once, after SaslHandshake chose PLAIN",
            auth_bytes=b"",
        )
    refused = _authenticate(bytes(request.auth_bytes), context)
    if refused is not None:
        return SaslAuthenticateResponse(
            version=version,
            error_code=SASL_AUTHENTICATION_FAILED,
            error_message=f"authentication failed: {refused}",
            auth_bytes=b"",
        )
    return SaslAuthenticateResponse(
        version=version,
        error_code=NONE,
        error_message=None,
        auth_bytes=b"",
        session_lifetime_ms=NO_SESSION_LIFETIME_MS,
    )
