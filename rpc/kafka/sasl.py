"""SaslHandshake and SaslAuthenticate: PLAIN and OAUTHBEARER onto twinlog's tokens file
(``sasl_oauthbearer``), and SCRAM-SHA-256 and SCRAM-SHA-512 onto the broker's SCRAM
credentials (``sasl_scram``).

SaslHandshake v1 is followed by SaslAuthenticate carrying the mechanism's messages (one for
PLAIN and OAUTHBEARER, two for SCRAM); v0 (KIP-43, sent by librdkafka 2.0) by the same messages as frames of
their own, each answered by the server's message as a frame (PLAIN's is empty), as Kafka
does (``authenticate_unframed``, called by the listener, which reads those frames). A v0
login that fails is answered by closing the connection: there is no frame to carry an error.

PLAIN's message is ``authzid NUL user NUL password`` (RFC 4616): the user is the
principal and the password its token, which must be that principal's in the tokens file
(an authzid, if given, must be the user). SCRAM proves the user against its stored
credential (``twinlog users set-scram``, AlterUserScramCredentials). A failed
authentication is answered SASL_AUTHENTICATION_FAILED with a reason that never quotes the
password, then the connection is closed; it is audited (``authentication.failed``, with the
client's address, the mechanism and the user named, never the password), as is a handshake
asking for a mechanism not offered. A credential store that does not answer (a cluster's
ZooKeeper) is no failed login: the connection is closed with a log line, and the client
connects and tries again. Without a tokens file every connection is already the anonymous
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

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    ILLEGAL_SASL_STATE,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    UNKNOWN_SERVER_ERROR,
    UNSUPPORTED_SASL_MECHANISM,
)
from twinlog.rpc.kafka.sasl_oauthbearer import OAUTHBEARER, oauthbearer_proven
from twinlog.rpc.kafka.sasl_scram import SCRAM_MECHANISMS, Step, scram_offered, scram_step
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.policy.auth import Principal

log = logging.getLogger("twinlog.kafka")

PLAIN = "PLAIN"
NO_SESSION_LIFETIME_MS = 0  # the session lasts as long as the connection
MECHANISM_CHARS_LOGGED = 32  # of a mechanism asked for and not offered (longer: cut)


def offered_mechanisms(context: KafkaContext) -> list[str]:
    """PLAIN and OAUTHBEARER always (with a tokens file); SCRAM where the broker keeps
    credentials."""
    token_mechanisms = [PLAIN, OAUTHBEARER]
    return [*token_mechanisms, *SCRAM_MECHANISMS] if scram_offered(context) else token_mechanisms


def handle_sasl_handshake(
    request: SaslHandshakeRequest, version: int, context: KafkaContext
) -> SaslHandshakeResponse:
    connection = context.connection
    offered = offered_mechanisms(context)
    if context.guard.tokens is None or connection.authenticated:
        error_code = ILLEGAL_SASL_STATE
    elif request.mechanism not in offered:
        error_code = UNSUPPORTED_SASL_MECHANISM
        audit(
            "authentication.failed",
            peer=connection.peer,
            door="kafka",
            mechanism=str(request.mechanism)[:MECHANISM_CHARS_LOGGED],
            reason=f"mechanism not enabled: this listener offers {', '.join(offered)}",
        )
    else:
        connection.mechanism = request.mechanism
        connection.unframed_sasl_next = version == 0
        error_code = NONE
    return SaslHandshakeResponse(version=version, error_code=error_code, mechanisms=offered)


def authenticate_unframed(auth_bytes: bytes, context: KafkaContext) -> bytes | None:
    """After SaslHandshake v0: one of the mechanism's messages as its own frame (no
    SaslAuthenticate around it). The server's message to send back as a frame (PLAIN's
    and SCRAM's last end the login); None (logged, audited when a login failed) when the
    caller closes the connection, as Kafka does for v0, having no frame for an error."""
    connection = context.connection
    mechanism = connection.mechanism
    assert connection.unframed_sasl_next and mechanism is not None
    if mechanism in SCRAM_MECHANISMS:
        step = _scram_step(auth_bytes, mechanism, context)
        if step is None or step.refused is not None:
            return None
        connection.unframed_sasl_next = not connection.authenticated
        return step.answer
    connection.unframed_sasl_next = False
    return b"" if _authenticate(auth_bytes, context) is None else None


def _authenticate(auth_bytes: bytes, context: KafkaContext) -> str | None:
    """Make the connection the principal a PLAIN or OAUTHBEARER message proves; None, or
    why it cannot (logged, and the connection is closed after the answer)."""
    mechanism = context.connection.mechanism
    tokens = context.guard.tokens
    assert tokens is not None
    if mechanism == OAUTHBEARER:
        principal, user, reason = oauthbearer_proven(auth_bytes, tokens)
    else:
        principal, user, reason = _proven(auth_bytes, context)
    if principal is None:
        log.warning("Kafka SASL/%s authentication refused: %s", mechanism, reason)
        audit(
            "authentication.failed",
            peer=context.connection.peer,
            door="kafka",
            mechanism=mechanism,
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
    mechanism = connection.mechanism
    if mechanism not in offered_mechanisms(context) or connection.authenticated:
        connection.close_after_answer = "SaslAuthenticate out of turn"
        return _answer(
            version,
            ILLEGAL_SASL_STATE,
            "SaslAuthenticate comes after SaslHandshake chose a mechanism, until the login ends",
        )
    if mechanism in SCRAM_MECHANISMS:
        return _scram_authenticate(bytes(request.auth_bytes), mechanism, version, context)
    refused = _authenticate(bytes(request.auth_bytes), context)
    if refused is not None:
        return _answer(version, SASL_AUTHENTICATION_FAILED, f"authentication failed: {refused}")
    return _answer(version, NONE, None)


def _scram_authenticate(
    auth_bytes: bytes, mechanism: str, version: int, context: KafkaContext
) -> SaslAuthenticateResponse:
    step = _scram_step(auth_bytes, mechanism, context)
    if step is None:
        return _answer(
            version,
            UNKNOWN_SERVER_ERROR,
            "the broker could not read the SCRAM credentials; connect again and retry",
        )
    if step.refused is not None:
        return _answer(
            version, SASL_AUTHENTICATION_FAILED, f"authentication failed: {step.refused}"
        )
    return _answer(version, NONE, None, step.answer)


def _scram_step(auth_bytes: bytes, mechanism: str, context: KafkaContext) -> Step | None:
    """One SCRAM message answered, whichever frame carried it. A refusal is logged,
    audited and closes the connection after the answer; None: the credential store did
    not answer (logged, the connection closed; no failed login)."""
    connection = context.connection
    try:
        step = scram_step(mechanism, auth_bytes, context)
    except TwinlogError as error:
        connection.scram = None
        log.warning("Kafka SASL/%s login not checked: %s", mechanism, error)
        connection.close_after_answer = "the SCRAM credentials could not be read"
        return None
    if step.refused is not None:
        log.warning("Kafka SASL/%s authentication refused: %s", mechanism, step.refused)
        audit(
            "authentication.failed",
            peer=connection.peer,
            door="kafka",
            mechanism=mechanism,
            user=step.user,
            reason=step.refused,
        )
        connection.close_after_answer = "SASL authentication failed"
    return step


def _answer(
    version: int, error_code: int, message: str | None, auth_bytes: bytes = b""
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        version=version,
        error_code=error_code,
        error_message=message,
        auth_bytes=auth_bytes,
        session_lifetime_ms=NO_SESSION_LIFETIME_MS,
    )
