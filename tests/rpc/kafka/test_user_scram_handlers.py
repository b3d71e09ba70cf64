"""DescribeUserScramCredentials and AlterUserScramCredentials (``user_scram_credentials``)
and the SCRAM login steps (``sasl_scram``), called directly with a listener's context over
a real broker (their rows in the listener's API table and SaslHandshake's offer are not
wired yet)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.kafka.access import new_connection
from twinlog.rpc.kafka.error_codes import (
    DUPLICATE_RESOURCE,
    NONE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNSUPPORTED_SASL_MECHANISM,
)
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.sasl_scram import scram_step
from twinlog.rpc.kafka.user_scram_credentials import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from twinlog.rpc.policy.auth import Acl, Guard, Principal, TokenTable, parse_grant

CLUSTER_AUTHORIZATION_FAILED = 31
Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
UserName = DescribeUserScramCredentialsRequest.UserName


@pytest.fixture()
def listener(tmp_path: Path) -> Iterator[KafkaListener]:
    guard = Guard(
        TokenTable([("ops-token-0123456789", "ops")]),
        Acl([parse_grant(["ops", "alter", "cluster:*"], "test")]),
        mutual_tls=False,
    )
    broker = Broker.open(tmp_path / "data")
    listener = KafkaListener(broker, "127.0.0.1", 0, guard=guard)
    try:
        yield listener
    finally:
        listener.stop(grace_ms=0)
        broker.close()


def _context(listener: KafkaListener, principal: str) -> object:
    connection = new_connection(listener.context.guard)
    connection.principal, connection.authenticated = Principal(principal), True
    return dataclasses.replace(listener.context, connection=connection)


def _upsertion(name: str, mechanism: int, password: str, iterations: int = 4096) -> Upsertion:
    salt = b"0123456789abcdef"
    digest = {1: "sha256", 2: "sha512"}.get(mechanism, "sha256")
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    return Upsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted
    )


def test_alter_then_describe_then_a_scram_login(listener: KafkaListener) -> None:
    context = _context(listener, "ops")
    request = AlterUserScramCredentialsRequest(
        version=0,
        deletions=[Deletion(name="ghost", mechanism=1)],
        upsertions=[
            _upsertion("alice", 2, "pw-alice"),
            _upsertion("bob", 1, "pw", iterations=1000),
            _upsertion("carol", 3, "pw"),
            _upsertion("dave", 1, "pw"),
            _upsertion("dave", 1, "pw2"),
        ],
    )
    answer = handle_alter_user_scram_credentials(request, 0, context)  # type: ignore[arg-type]
    codes = {result.user: result.error_code for result in answer.results}
    assert codes == {
        "ghost": RESOURCE_NOT_FOUND,
        "alice": NONE,
        "bob": UNACCEPTABLE_CREDENTIAL,
        "carol": UNSUPPORTED_SASL_MECHANISM,
        "dave": DUPLICATE_RESOURCE,
    }
    described = handle_describe_user_scram_credentials(
        DescribeUserScramCredentialsRequest(
            version=0, users=[UserName(name="alice"), UserName(name="nobody")]
        ),
        0,
        context,  # type: ignore[arg-type]
    )
    assert described.error_code == NONE
    by_user = {result.user: result for result in described.results}
    assert by_user["nobody"].error_code == RESOURCE_NOT_FOUND
    assert [(i.mechanism, i.iterations) for i in by_user["alice"].credential_infos] == [(2, 4096)]

    for password, succeeds in (("pw-alice", True), ("wrong", False)):
        login = _context(listener, "anonymous")
        client = ScramClient("alice", password, "SCRAM-SHA-512")
        first = scram_step("SCRAM-SHA-512", client.first_message(), login)  # type: ignore[arg-type]
        client.process_server_first_message(first.answer)
        final = scram_step("SCRAM-SHA-512", client.final_message(), login)  # type: ignore[arg-type]
        assert (final.refused is None) is succeeds
        if succeeds:
            client.process_server_final_message(final.answer)
            assert login.connection.principal == Principal("alice")  # type: ignore[attr-defined]


def test_changing_credentials_needs_alter_on_the_cluster(listener: KafkaListener) -> None:
    context = _context(listener, "mallory")
    request = AlterUserScramCredentialsRequest(
        version=0, deletions=[], upsertions=[_upsertion("mallory", 1, "pw")]
    )
    answer = handle_alter_user_scram_credentials(request, 0, context)  # type: ignore[arg-type]
    assert [r.error_code for r in answer.results] == [CLUSTER_AUTHORIZATION_FAILED]
    described = handle_describe_user_scram_credentials(
        DescribeUserScramCredentialsRequest(version=0, users=None),
        0,
        context,  # type: ignore[arg-type]
    )
    assert described.error_code == CLUSTER_AUTHORIZATION_FAILED
