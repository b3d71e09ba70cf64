"""The grants made at run time, without a network: how LITERAL and PREFIXED patterns match
(internal topics only by a pattern naming them), what a stored grant may be, the file
store (durable, 0600, checked), the view that joins the ACL file's grants with the
store's (and audits each change), and Kafka's filters over both."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from twinlog.engine.base.errors import CorruptJournalError, InvalidConfigError
from twinlog.rpc.policy.acl_admin import (
    AclsDisabledError,
    acl_in_force,
    create_acls,
    delete_acls,
)
from twinlog.rpc.policy.acl_bindings import (
    AclFilter,
    PatternFilter,
    Source,
    check_binding,
    kafka_form,
)
from twinlog.rpc.policy.acl_store import FILE_NAME, FileAclStore
from twinlog.rpc.policy.acl_view import LiveAcl
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.policy.auth import Acl, Grant, Guard, Operation, PatternType, Principal, Resource

ALICE = Principal("alice")
LITERAL, PREFIXED, GLOB = PatternType.LITERAL, PatternType.PREFIXED, PatternType.GLOB


def grant(
    name: str,
    pattern: PatternType = LITERAL,
    operation: str = "write",
    resource: Resource = Resource.TOPIC,
    principal: str = "alice",
) -> Grant:
    return Grant(principal, operation, name, resource, pattern)


def test_literal_and_prefixed_patterns_match_as_kafkas() -> None:
    write = Operation.WRITE
    assert grant("orders").allows(ALICE, write, "orders")
    assert not grant("orders").allows(ALICE, write, "orders-eu")
    assert not grant("ord*").allows(ALICE, write, "orders")  # a literal name, not a glob
    assert grant("*").allows(ALICE, write, "anything")
    assert grant("orders-", PREFIXED).allows(ALICE, write, "orders-eu")
    assert not grant("orders-", PREFIXED).allows(ALICE, write, "orders")
    assert not grant("orders").allows(Principal("bob"), write, "orders")
    assert grant("orders", principal="*").allows(Principal("bob"), write, "orders")
    assert not grant("orders").allows(ALICE, Operation.READ, "orders")
    assert grant("orders", operation="all").allows(ALICE, Operation.READ, "orders")
    # internal topics only by a pattern that names them, as the ACL file's
    assert not grant("*").allows(ALICE, write, "__consumer_offsets")
    assert not grant("", PREFIXED).allows(ALICE, write, "__consumer_offsets")
    assert grant("__consumer_offsets").allows(ALICE, write, "__consumer_offsets")
    assert grant("__", PREFIXED).allows(ALICE, write, "__consumer_offsets")
    # a group grant is no topic grant
    assert not grant("orders", operation="read", resource=Resource.GROUP).allows(
        ALICE, Operation.READ, "orders"
    )


@pytest.mark.parametrize(
    ("refused", "says"),
    [
        (grant("orders", GLOB), "globs belong in the ACL file"),
        (grant("orders", operation="idempotent-write"), "does not apply"),
        (grant("kafka-cluster", operation="read", resource=Resource.CLUSTER), "does not apply"),
        (grant("orders", operation="abort"), "transactional ids only"),
        (grant("billing", operation="write", resource=Resource.GROUP), "does not apply"),
        (grant("other", operation="alter", resource=Resource.CLUSTER), "kafka-cluster"),
        (grant("kafka-", PREFIXED, "alter", Resource.CLUSTER), "kafka-cluster"),
        (grant("x", operation="alter", resource=Resource.BROKER), "by its id"),
        (grant(""), "empty"),
        (grant("orders", principal="two words"), "one word"),
        (grant("orders", operation="fly"), "not one of"),
    ],
)
def test_a_grant_that_means_nothing_is_refused_saying_why(refused: Grant, says: str) -> None:
    with pytest.raises(InvalidConfigError, match=says):
        check_binding(refused)


@pytest.mark.parametrize(
    "accepted",
    [
        # what kafka-acls.sh --producer and --consumer grant besides write and read
        grant("orders", operation="describe"),
        grant("orders", operation="create"),
        grant("kafka-cluster", operation="idempotent-write", resource=Resource.CLUSTER),
        # what Kafka UIs and Terraform providers grant for settings
        grant("orders", operation="alter-configs"),
        grant("orders-", PREFIXED, operation="describe-configs"),
        grant("kafka-cluster", operation="describe-configs", resource=Resource.CLUSTER),
        grant("kafka-cluster", operation="create", resource=Resource.CLUSTER),
    ],
)
def test_kafkas_grantable_operations_are_accepted(accepted: Grant) -> None:
    assert check_binding(accepted) is accepted


def test_a_wider_grant_allows_what_kafka_says_it_implies_and_nothing_more() -> None:
    def acl(*grants: Grant) -> Acl:
        return Acl(list(grants))

    cluster = Resource.CLUSTER
    # CREATE on the cluster creates any topic, but writes none
    creator = acl(grant("kafka-cluster", operation="create", resource=cluster))
    assert creator.allows(ALICE, Operation.CREATE, "orders")
    assert not creator.allows(ALICE, Operation.WRITE, "orders")
    assert not creator.allows(Principal("bob"), Operation.CREATE, "orders")
    # ALTER on the cluster alters, and so changes the settings of, every topic
    admin = acl(grant("*", GLOB, operation="alter", resource=cluster))
    assert admin.allows(ALICE, Operation.ALTER, "orders")
    assert admin.allows(ALICE, Operation.ALTER, "__txn_journal")
    assert admin.allows(ALICE, Operation.ALTER_CONFIGS, "orders")
    assert not admin.allows(ALICE, Operation.DELETE, "orders")
    # a topic's ALTER changes its settings (twinlog's grants before alter-configs)...
    alterer = acl(grant("orders", operation="alter"))
    assert alterer.allows(ALICE, Operation.ALTER_CONFIGS, "orders")
    assert not alterer.allows(ALICE, Operation.ALTER_CONFIGS, "refunds")
    # ...but ALTER_CONFIGS alone does not grow it or move its replicas
    configurer = acl(grant("orders", operation="alter-configs"))
    assert configurer.allows(ALICE, Operation.ALTER_CONFIGS, "orders")
    assert configurer.allows(ALICE, Operation.DESCRIBE_CONFIGS, "orders")
    assert not configurer.allows(ALICE, Operation.ALTER, "orders")
    # read and write show a topic's settings, as before describe-configs was a word here
    reader = acl(grant("orders", operation="read"))
    assert reader.allows(ALICE, Operation.DESCRIBE_CONFIGS, "orders")
    assert not reader.allows(ALICE, Operation.ALTER_CONFIGS, "orders")
    # DESCRIBE shows the topic (at the Kafka listener) and reads nothing
    describer = acl(grant("orders", operation="describe"))
    guard = Guard(None, describer, mutual_tls=False)
    assert guard.may_describe(ALICE, "orders", Resource.TOPIC)
    assert not guard.may_describe(ALICE, "refunds", Resource.TOPIC)
    assert not describer.allows(ALICE, Operation.READ, "orders")
    assert Guard(None, reader, mutual_tls=False).may_describe(ALICE, "orders", Resource.TOPIC)


def test_the_file_store_keeps_grants_across_a_reopen_mode_600(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    store = FileAclStore(path)
    assert store.grants() == ()
    first, second = grant("orders"), grant("loader-", PREFIXED, resource=Resource.TRANSACTIONAL_ID)
    assert store.add([first, second, first]) == [first, second]
    assert store.add([first]) == []  # already there: nothing changes
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert FileAclStore(path).grants() == (first, second)  # what a restarted broker reads
    assert store.remove([first, grant("never")]) == [first]
    assert FileAclStore(path).grants() == (second,)
    with pytest.raises(InvalidConfigError, match="does not apply"):
        store.add([grant("fine"), grant("billing", resource=Resource.GROUP)])
    assert FileAclStore(path).grants() == (second,)  # nothing of a refused batch


def test_a_damaged_store_file_stops_the_broker_naming_it(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    FileAclStore(path).add([grant("orders")])
    text = path.read_text()
    path.write_text(text.replace("orders", "ordens"))  # the checksum no longer matches
    with pytest.raises(CorruptJournalError, match=str(path)):
        FileAclStore(path)


def test_the_view_joins_file_and_store_and_audits_each_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file_grant = Grant("ops", "alter", "*", Resource.CLUSTER)
    store = FileAclStore(tmp_path / FILE_NAME)
    view = LiveAcl([file_grant], store, "acl.txt")
    guard = Guard(None, view, mutual_tls=False)
    assert acl_in_force(guard) is view
    assert not view.allows(ALICE, Operation.WRITE, "orders")
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        assert create_acls(view, [grant("orders")], "ops", "-") == [grant("orders")]
    assert view.allows(ALICE, Operation.WRITE, "orders")
    assert view.grants == (file_grant, grant("orders"))
    assert view.source_of(file_grant) is Source.FILE
    assert view.source_of(grant("orders")) is Source.STORE
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert any(line.startswith("acl.create principal=ops") for line in lines), lines
    assert any(
        line.startswith("acl.applied") and 'added="alice write topic:orders (literal)"' in line
        for line in lines
    ), lines

    every = AclFilter()
    [outcome] = delete_acls(view, [every], "ops", "-")
    assert outcome.removed == [grant("orders")]
    assert outcome.from_file == [file_grant]  # named, and kept
    assert view.grants == (file_grant,)
    assert not view.allows(ALICE, Operation.WRITE, "orders")


def test_administration_without_acls_or_store_is_refused() -> None:
    with pytest.raises(AclsDisabledError, match="--acl-file"):
        acl_in_force(Guard(None, None, mutual_tls=False))
    with pytest.raises(AclsDisabledError, match="no ACL store"):
        acl_in_force(Guard(None, Acl([]), mutual_tls=False))


def test_kafka_filters_over_stored_and_file_grants() -> None:
    literal, prefixed = grant("orders"), grant("ord", PREFIXED)
    wildcard = grant("*")
    file_prefix = grant("orders*", GLOB)  # an ACL file's glob Kafka writes PREFIXED
    odd_glob = grant("o?ders", GLOB)
    every = [literal, prefixed, wildcard, file_prefix, odd_glob]
    assert kafka_form(file_prefix) == (PREFIXED, "orders")
    assert kafka_form(grant("orders", GLOB)) == (LITERAL, "orders")
    assert kafka_form(odd_glob) is None

    def names(**fields: object) -> list[Grant]:
        chosen = AclFilter(**fields)  # type: ignore[arg-type]
        return [g for g in every if chosen.matches(g)]

    assert names() == every
    assert names(name="orders") == [literal, file_prefix]  # ANY: that name, any type
    assert names(name="orders", pattern=PatternFilter.LITERAL) == [literal]
    assert names(name="orders", pattern=PatternFilter.PREFIXED) == [file_prefix]
    assert names(name="orders", pattern=PatternFilter.MATCH) == [
        literal,
        prefixed,
        wildcard,
        file_prefix,
        odd_glob,
    ]
    assert names(name="ordinal", pattern=PatternFilter.MATCH) == [prefixed, wildcard]
    assert names(operation="read") == []
    assert names(principal="bob") == []
    assert names(kafka_only=True) == [literal, prefixed, wildcard, file_prefix]


def test_the_store_file_is_json_with_a_checksum(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    FileAclStore(path).add([grant("orders")])
    body, checksum = path.read_text().rstrip("\n").rsplit("\n", 1)
    assert checksum.startswith("crc32c ")
    document = json.loads(body)
    assert document["acls"] == [
        {
            "principal": "alice",
            "operation": "write",
            "resource": "topic",
            "name": "orders",
            "pattern_type": "literal",
        }
    ]


def test_an_embedded_admin_edits_the_data_directorys_store(tmp_path: Path) -> None:
    from twinlog.engine.broker.broker import Broker
    from twinlog.rpc.client import AclEntry, Admin

    broker = Broker.open(tmp_path / "data")
    try:
        admin = Admin(broker)
        entry = AclEntry("alice", "read", "group", "billing-", "prefixed")
        assert admin.create_acls([entry]) == [entry]
        assert admin.list_acls(resource_type="group") == [entry]
        assert admin.list_acls(principal="bob") == []
        with pytest.raises(InvalidConfigError, match="no stored grant"):
            admin.delete_acls([AclEntry("alice", "read", "group", "billing-")])  # literal
        assert admin.delete_acls([entry]) == [entry]
    finally:
        broker.close()
    assert FileAclStore(tmp_path / "data" / FILE_NAME).grants() == ()
