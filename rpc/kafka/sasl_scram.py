"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the Kafka listener: two SaslAuthenticate rounds
(client-first -> server-first, client-final -> server-final) onto the broker's SCRAM
credentials (``twinlog.rpc.policy.scram_store``, set by ``twinlog users`` or
AlterUserScramCredentials). The user proven is the principal (``alice``, as with PLAIN),
so the ACL file's grants apply unchanged.

Offered when the listener authenticates (a tokens file) and the broker has a data
directory. After SaslHandshake v1 SaslAuthenticate carries the messages; after v0 (as
librdkafka 2.0 sends) they are frames of their own (``sasl.authenticate_unframed``).
"""

from __future__ import annotations

from dataclasses import dataclass

from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.policy.auth import Principal
from twinlog.rpc.policy.scram import MECHANISMS, ScramError, ServerExchange
from twinlog.rpc.policy.scram_store import scram_store_of

SCRAM_MECHANISMS = MECHANISMS


def scram_offered(context: KafkaContext) -> bool:
    return scram_store_of(context.broker) is not None


@dataclass
class Step:
    """One SaslAuthenticate's outcome: the server's message, or why the login failed
    (the same words for an unknown user and a wrong password), and the user named."""

    answer: bytes
    refused: str | None
    user: str


def scram_step(mechanism: str, auth_bytes: bytes, context: KafkaContext) -> Step:
    """Answer one SCRAM message of the connection's login; on the last, the connection
    becomes the user's principal."""
    connection = context.connection
    exchange: ServerExchange | None = connection.scram
    try:
        if exchange is None:
            store = scram_store_of(context.broker)
            assert store is not None  # the handshake offered SCRAM
            exchange = ServerExchange(mechanism, lambda user: store.credential(user, mechanism))
            connection.scram = exchange
            return Step(exchange.first(auth_bytes), None, exchange.user or "-")
        connection.scram = None
        answer = exchange.final(auth_bytes)
    except ScramError as error:
        connection.scram = None
        user = exchange.user if exchange is not None and exchange.user else "-"
        return Step(b"", str(error), user)
    assert exchange.user is not None
    connection.principal = Principal(exchange.user)
    connection.authenticated = True
    return Step(answer, None, exchange.user)
