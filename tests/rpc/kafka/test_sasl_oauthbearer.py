"""SASL/OAUTHBEARER onto the tokens file (RFC 7628): kafka-python and confluent-kafka
clients whose token provider returns a tokens-file token authenticate as its principal,
under the same ACLs as PLAIN's; a token not in the file, or an authorization id that is
not its principal, is refused, audited without the token, and the connection closed."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest
from kafka.net.sasl.oauth import AbstractTokenProvider

from twinlog.rpc.kafka.sasl_oauthbearer import oauthbearer_proven
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.policy.auth import TokenTable
from twinlog.tests.rpc.kafka.test_sasl import (
    ALICE_TOKEN,
    BOB_TOKEN,
    CLIENT_TIMEOUT_MS,
    _assert_audited_failure,
    _frame,
    _login,
    secured,
)

__all__ = ["secured"]  # the listener with tokens and ACLs, as test_sasl's


class FileToken(AbstractTokenProvider):
    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def token(self) -> str:
        return self._token


def test_kafka_python_and_confluent_kafka_authenticate_with_a_bearer_token(
    secured: Any,
) -> None:
    _, listener = secured
    bootstrap = f"127.0.0.1:{listener.port}"
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=FileToken(ALICE_TOKEN),
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        max_block_ms=CLIENT_TIMEOUT_MS,
    )
    try:
        producer.send("orders", b"by alice's bearer token", partition=0).get(timeout=10)
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send("secrets", b"not hers", partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER",
            "oauth_cb": lambda _config: (BOB_TOKEN, time.time() + 3600),
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition("orders", 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        values = []
        deadline = time.monotonic() + 10
        while b"by alice's bearer token" not in values and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
        assert b"by alice's bearer token" in values
    finally:
        consumer.close()


@pytest.mark.parametrize(
    "message, secret",
    [
        (b"n,,\x01auth=Bearer not-a-token-of-the-file\x01\x01", "not-a-token-of-the-file"),
        (b"n,a=bob,\x01auth=Bearer " + ALICE_TOKEN.encode() + b"\x01\x01", ALICE_TOKEN),
    ],
)
def test_a_token_not_in_the_file_or_another_authzid_is_refused_and_audited(
    secured: Any, message: bytes, secret: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, listener = secured
    connection = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        try:
            answer = _login(connection, "OAUTHBEARER", message)
            assert answer.error_code == kafka.errors.SaslAuthenticationFailedError.errno
            assert secret not in answer.error_message
            assert _frame(connection) == b""  # closed after the answer
            local_port = connection.getsockname()[1]
        finally:
            connection.close()
    _assert_audited_failure(caplog, local_port, secret)


@pytest.mark.parametrize(
    "message, why",
    [
        (b"n,,\x01auth=Bearer alice-secret-token\x01\x01", ""),
        (b"n,a=alice,\x01auth=Bearer alice-secret-token\x01host=x\x01\x01", ""),
        (b"n,,\x01auth=Basic alice-secret-token\x01\x01", "no 'auth=Bearer TOKEN'"),
        (b"n,,\x01auth=Bearer alice-secret-token\x01", "RFC 7628"),
        (b"y,,\x01auth=Bearer alice-secret-token\x01\x01", "RFC 7628"),
        (b"n,x,\x01auth=Bearer alice-secret-token\x01\x01", "gs2 header"),
        (b"\xff\x01\x01", "UTF-8"),
    ],
)
def test_the_client_message_is_read_as_rfc_7628_writes_it(message: bytes, why: str) -> None:
    principal, _user, reason = oauthbearer_proven(
        message, TokenTable([("alice-secret-token", "alice")])
    )
    if why:
        assert principal is None and why in reason and "alice-secret-token" not in reason
    else:
        assert principal is not None and principal.name == "alice" and reason == ""
