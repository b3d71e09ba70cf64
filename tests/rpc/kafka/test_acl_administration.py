"""CreateAcls, DescribeAcls and DeleteAcls through the Kafka listener, with unmodified
kafka-python and confluent-kafka admin clients, on a broker with tokens and an ACL file
(built as ``twinlog serve`` builds it: ``guard_of``): a grant created lets a principal
produce that was refused, is described, is kept on disk (what a restarted broker reads),
and once deleted the produce is refused again; a principal without ALTER on the cluster
is refused and audited; DENY, hosts and the ACL file's own grants are refused clearly."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka.admin as confluent
import kafka
import kafka.errors
import pytest
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.kafka.error_codes import NONE
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.policy.acl_store import FILE_NAME, FileAclStore
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.policy.auth import Grant, PatternType, Resource
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import guard_of
from twinlog.tests.rpc.kafka.conftest import RawConnection

CLIENT_TIMEOUT_MS = 10_000
TOKENS = {
    "ops": "ops-token-0123456789",
    "alice": "alice-token-0123456789",
    "bob": "bob-token-0123456789",
    # test_acl_kafka_operations' principals
    "carol": "carol-token-0123456789",
    "dave": "dave-token-0123456789",
}
ACL_FILE = """
ops    alter  cluster:*
ops    write  seeded*
alice  read   group:*
"""


@dataclass
class Secured:
    broker: Broker
    listener: KafkaListener
    data_dir: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.listener.port}"

    def stored(self) -> tuple[Grant, ...]:
        """The grants on disk, as a restarted broker reads them."""
        return FileAclStore(self.data_dir / FILE_NAME).grants()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    directory = tmp_path_factory.mktemp("kafka-acls")
    (directory / "tokens").write_text("".join(f"{t} {p}\n" for p, t in TOKENS.items()))
    (directory / "acl").write_text(ACL_FILE)
    config = ServerConfig(
        port=0, tokens_file=str(directory / "tokens"), acl_file=str(directory / "acl")
    )
    with listening(directory, config, ("orders", "refunds", "prefixed-a")) as served:
        yield served


@contextmanager
def listening(directory: Path, config: ServerConfig, topics: tuple[str, ...]) -> Iterator[Secured]:
    """A broker in ``directory`` with ``topics``, behind a Kafka listener guarded as
    ``twinlog serve`` guards it (``guard_of``)."""
    broker = Broker.open(directory / "data")
    for topic in topics:
        broker.create_topic(topic, 1)
    listener = KafkaListener(broker, "127.0.0.1", 0, guard=guard_of(config, broker))
    listener.start()
    try:
        yield Secured(broker, listener, directory / "data")
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def sasl(user: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": TOKENS[user],
        "request_timeout_ms": CLIENT_TIMEOUT_MS,
    }


def admin_of(secured: Secured, user: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=secured.bootstrap, **sasl(user))


def produces(secured: Secured, user: str, topic: str) -> bool:
    """Does a kafka-python producer as ``user`` get a record into ``topic``?"""
    producer = kafka.KafkaProducer(
        bootstrap_servers=secured.bootstrap, max_block_ms=3_000, **sasl(user)
    )
    try:
        producer.send(topic, b"by " + user.encode(), partition=0).get(timeout=10)
        return True
    except kafka.errors.TopicAuthorizationFailedError:
        return False
    finally:
        producer.close(timeout=5)


def alice_writes(topic: str, pattern: ACLResourcePatternType) -> ACL:
    return ACL(
        principal="User:alice",
        host="*",
        operation=ACLOperation.WRITE,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(ResourceType.TOPIC, topic, pattern),
    )


def alice_filter(pattern: ACLResourcePatternType = ACLResourcePatternType.ANY) -> ACLFilter:
    return ACLFilter(
        principal="User:alice",
        host="*",
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, None, pattern),
    )


def test_a_created_acl_lets_a_principal_produce_until_it_is_deleted(secured: Secured) -> None:
    assert not produces(secured, "alice", "orders")
    admin = admin_of(secured, "ops")
    try:
        created = admin.create_acls([alice_writes("orders", ACLResourcePatternType.LITERAL)])
        assert created["failed"] == [] and len(created["succeeded"]) == 1, created
        assert (
            Grant("alice", "write", "orders", Resource.TOPIC, PatternType.LITERAL)
            in secured.stored()
        )
        assert produces(secured, "alice", "orders")
        assert not produces(secured, "alice", "refunds")  # a LITERAL grant: that name only

        described, error = admin.describe_acls(alice_filter())
        assert error is kafka.errors.NoError, error
        assert [
            (a.resource_pattern.resource_name, a.resource_pattern.pattern_type, a.operation)
            for a in described
        ] == [("orders", ACLResourcePatternType.LITERAL, ACLOperation.WRITE)]

        [(_, deleted, error)] = admin.delete_acls([alice_filter()])
        assert error is kafka.errors.NoError, error
        assert [a.resource_pattern.resource_name for a in deleted] == ["orders"]
        assert secured.stored() == ()
        assert not produces(secured, "alice", "orders")
        described, _ = admin.describe_acls(alice_filter())
        assert described == []
    finally:
        admin.close()


def test_a_prefixed_acl_covers_the_names_it_starts(secured: Secured) -> None:
    admin = admin_of(secured, "ops")
    try:
        admin.create_acls([alice_writes("prefixed-", ACLResourcePatternType.PREFIXED)])
        assert produces(secured, "alice", "prefixed-a")
        assert not produces(secured, "alice", "orders")
        match = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                ResourceType.TOPIC, "prefixed-a", ACLResourcePatternType.MATCH
            ),
        )
        described, _ = admin.describe_acls(match)
        assert [(a.principal, a.resource_pattern.resource_name) for a in described] == [
            ("User:alice", "prefixed-")
        ]
        admin.delete_acls([alice_filter(ACLResourcePatternType.PREFIXED)])
        assert not produces(secured, "alice", "prefixed-a")
    finally:
        admin.close()


def test_a_principal_without_alter_on_the_cluster_is_refused_and_audited(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    admin = admin_of(secured, "bob")
    try:
        with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
            created = admin.create_acls([alice_writes("orders", ACLResourcePatternType.LITERAL)])
            with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
                admin.describe_acls(alice_filter())
    finally:
        admin.close()
    assert created["failed"] == [kafka.errors.ClusterAuthorizationFailedError], created
    assert secured.stored() == ()
    denied = [
        r.getMessage()
        for r in caplog.records
        if r.name == AUDIT_LOGGER and r.getMessage().startswith("acl.denied ")
    ]
    assert any(
        "principal=bob" in line and "resource=cluster" in line and "door=kafka" in line
        for line in denied
    ), denied


def test_deny_hosts_and_the_acl_files_grants_are_refused_clearly(secured: Secured) -> None:
    admin = admin_of(secured, "ops")
    try:
        deny = ACL(
            principal="User:alice",
            host="*",
            operation=ACLOperation.READ,
            permission_type=ACLPermissionType.DENY,
            resource_pattern=ResourcePattern(ResourceType.TOPIC, "orders"),
        )
        host = ACL(
            principal="User:alice",
            host="10.0.0.7",
            operation=ACLOperation.READ,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(ResourceType.TOPIC, "orders"),
        )
        created = admin.create_acls([deny, host])
        assert created["failed"] == [kafka.errors.InvalidRequestError] * 2, created

        # The file's grants are described as Kafka writes them...
        every = ACLFilter(
            principal="User:ops",
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                ResourceType.ANY, None, ACLResourcePatternType.ANY
            ),
        )
        described, _ = admin.describe_acls(every)
        assert sorted(
            (a.resource_pattern.resource_type, a.resource_pattern.resource_name, a.operation)
            for a in described
        ) == [
            (ResourceType.TOPIC, "seeded", ACLOperation.WRITE),
            (ResourceType.CLUSTER, "kafka-cluster", ACLOperation.ALTER),
        ]
        # ...and stay when a filter names them, each refused with the file named.
        [(_, matched, error)] = admin.delete_acls([every])
    finally:
        admin.close()
    assert error is kafka.errors.NoError
    assert len(matched) == 2
    assert secured.stored() == ()


def confluent_admin(secured: Secured) -> Any:
    return confluent.AdminClient(
        {
            "bootstrap.servers": secured.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "ops",
            "sasl.password": TOKENS["ops"],
        }
    )


def test_a_deny_says_twinlog_grants_only(secured: Secured) -> None:
    deny = confluent.AclBinding(
        confluent.ResourceType.TOPIC,
        "orders",
        confluent.ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        confluent.AclOperation.READ,
        confluent.AclPermissionType.DENY,
    )
    admin = confluent_admin(secured)  # held: a collected client fails its futures
    [future] = admin.create_acls([deny], request_timeout=10).values()
    with pytest.raises(confluent.KafkaException, match="twinlog grants only"):
        future.result(timeout=15)
    assert secured.stored() == ()


def test_confluent_kafka_creates_describes_and_deletes(secured: Secured) -> None:
    admin = confluent_admin(secured)
    binding = confluent.AclBinding(
        confluent.ResourceType.TOPIC,
        "refunds",
        confluent.ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        confluent.AclOperation.WRITE,
        confluent.AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding], request_timeout=10).values():
        assert future.result(timeout=15) is None
    assert produces(secured, "alice", "refunds")
    found = confluent.AclBindingFilter(
        confluent.ResourceType.TOPIC,
        None,
        confluent.ResourcePatternType.ANY,
        "User:alice",
        None,
        confluent.AclOperation.ANY,
        confluent.AclPermissionType.ANY,
    )
    described = admin.describe_acls(found, request_timeout=10).result(timeout=15)
    assert [(b.name, b.operation) for b in described] == [("refunds", confluent.AclOperation.WRITE)]
    for future in admin.delete_acls([found], request_timeout=10).values():
        assert [b.name for b in future.result(timeout=15)] == ["refunds"]
    assert not produces(secured, "alice", "refunds")


@pytest.fixture(scope="module")
def anonymous_admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A listener without tokens whose ACL file lets the anonymous principal administer
    ACLs: raw requests of every version need no SASL."""
    directory = tmp_path_factory.mktemp("kafka-acls-raw")
    (directory / "acl").write_text("anonymous alter cluster:*\n")
    with listening(directory, ServerConfig(port=0, acl_file=str(directory / "acl")), ()) as served:
        yield served


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_creates_describes_and_deletes(
    anonymous_admin: Secured, version: int
) -> None:
    topic = f"raw-v{version}"
    creation = CreateAclsRequest.AclCreation(
        resource_type=2,
        resource_name=topic,
        resource_pattern_type=3,
        principal="User:alice",
        host="*",
        operation=4,
        permission_type=3,
    )
    filter_fields = {
        "resource_type_filter": 2,
        "resource_name_filter": topic,
        "pattern_type_filter": 3,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    raw = RawConnection(anonymous_admin.listener.port)
    try:
        created = raw.call(CreateAclsRequest(creations=[creation]), CreateAclsResponse, version)
        assert [r.error_code for r in created.results] == [NONE]
        described = raw.call(DescribeAclsRequest(**filter_fields), DescribeAclsResponse, version)
        assert described.error_code == NONE
        assert [(r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [
            (topic, ["User:alice"])
        ]
        deleted = raw.call(
            DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**filter_fields)]),
            DeleteAclsResponse,
            version,
        )
        [result] = deleted.filter_results
        assert result.error_code == NONE
        assert [m.resource_name for m in result.matching_acls] == [topic]
    finally:
        raw.close()
    assert anonymous_admin.stored() == ()


def test_a_broker_without_acls_answers_security_disabled(raw: Any) -> None:
    answer = raw.call(
        DescribeAclsRequest(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        ),
        DescribeAclsResponse,
        3,
    )
    assert answer.error_code == kafka.errors.SecurityDisabledError.errno
    assert "--acl-file" in answer.error_message
