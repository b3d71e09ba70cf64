"""A cluster's stored ACL grants in ZooKeeper (``acl_znode``, ``ZooKeeperAclStore``,
``LiveAcl``), on a real ZooKeeper: a grant added through one broker is applied by another
through its watch within a second, with an ``acl.applied`` audit line; a broker started
later reads it; brokers adding at once both keep theirs; a znode that does not decode
leaves the grants in force as they were."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from zookeeper_support import SESSION_TIMEOUT_MS

from twinlog.engine.base.errors import CorruptJournalError, InvalidConfigError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.acl_znode import DOCUMENT_BYTES_MAX, AclWatch, read_acls
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.policy.acl_store import ZooKeeperAclStore, acl_store_of
from twinlog.rpc.policy.acl_view import LiveAcl
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.policy.auth import Grant, Operation, PatternType, Principal, Resource

ALICE = Principal("alice")
WAIT_S = 5.0  # a watch fires in milliseconds; this bounds the wait, it is not expected
APPLIED_WITHIN_S = 1.0


class Member:
    """A cluster broker as ``acl_store_of`` sees one: its ZooKeeper metadata store."""

    def __init__(self, connect: str, data_dir: Path) -> None:
        self.session = ZooKeeperSession(connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        self.metadata = ZooKeeperMetadataStore(self.session, data_dir, 1)
        self.data_dir = data_dir

    def store(self) -> ZooKeeperAclStore:
        store = acl_store_of(self)
        assert isinstance(store, ZooKeeperAclStore)
        return store


@pytest.fixture()
def members(zk_connect: str, tmp_path: Path) -> Iterator[Callable[[], Member]]:
    made: list[Member] = []

    def member() -> Member:
        made.append(Member(zk_connect, tmp_path / str(len(made))))
        return made[-1]

    yield member
    for one in made:
        one.session.close()


def writes(topic: str, pattern: PatternType = PatternType.LITERAL) -> Grant:
    return Grant("alice", "write", topic, Resource.TOPIC, pattern)


def wait_until(check: Callable[[], bool]) -> float:
    """Seconds until ``check()`` held (bounded by WAIT_S)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < WAIT_S, "not applied in time"
        time.sleep(0.01)
    return time.monotonic() - start


def test_a_grant_added_through_one_broker_is_applied_by_another(
    members: Callable[[], Member], caplog: pytest.LogCaptureFixture
) -> None:
    first, second = members(), members()
    assert acl_store_of(first) is first.store()  # one store (and one watch) per session
    seen_by_second = LiveAcl([], second.store(), "acl.txt")
    assert not seen_by_second.allows(ALICE, Operation.WRITE, "orders")
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        assert first.store().add([writes("orders"), writes("eu-", PatternType.PREFIXED)])
        took_s = wait_until(lambda: seen_by_second.allows(ALICE, Operation.WRITE, "eu-sales"))

        def applied() -> list[str]:
            return [r.getMessage() for r in caplog.records if "acl.applied" in r.getMessage()]

        wait_until(lambda: bool(applied()))  # audited just after the grants swap in
    assert took_s < APPLIED_WITHIN_S, took_s
    assert seen_by_second.allows(ALICE, Operation.WRITE, "orders")
    assert "stored_grants=2" in applied()[-1], applied()
    assert "config/acls" in applied()[-1]

    # A broker started later (or restarted) reads the grants before it serves.
    late = LiveAcl([], members().store(), "acl.txt")
    assert late.allows(ALICE, Operation.WRITE, "orders")

    assert second.store().remove([writes("orders")]) == [writes("orders")]
    wait_until(lambda: not late.allows(ALICE, Operation.WRITE, "orders"))
    assert late.allows(ALICE, Operation.WRITE, "eu-sales")
    assert first.store().grants() == (writes("eu-", PatternType.PREFIXED),)


def test_the_broker_that_changes_the_grants_applies_them_before_it_answers(
    members: Callable[[], Member], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read your writes: CreateAcls then DescribeAcls on one broker sees the grant, even
    when ZooKeeper's notification is slow (held back here), as Kafka's authorizer does."""
    member = members()
    view = LiveAcl([], member.store(), "acl.txt")
    deliver = AclWatch._on_data

    def late(watch: AclWatch, *args: Any) -> bool:
        time.sleep(0.3)
        return deliver(watch, *args)

    monkeypatch.setattr(AclWatch, "_on_data", late)
    assert member.store().add([writes("orders")]) == [writes("orders")]
    assert view.allows(ALICE, Operation.WRITE, "orders")
    assert member.store().remove([writes("orders")]) == [writes("orders")]
    assert not view.allows(ALICE, Operation.WRITE, "orders")


def test_brokers_adding_at_once_each_keep_their_grant(members: Callable[[], Member]) -> None:
    brokers = [members() for _ in range(3)]
    start = threading.Barrier(len(brokers))
    errors: list[BaseException] = []

    def add(index: int) -> None:
        try:
            start.wait(WAIT_S)
            for n in range(5):
                brokers[index].store().add([writes(f"t{index}-{n}")])
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(len(brokers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 4)
    assert not errors, errors
    assert len(brokers[0].store().grants()) == 15


def test_the_znode_is_plain_json_and_a_damaged_one_changes_nothing(
    members: Callable[[], Member],
) -> None:
    member = members()
    view = LiveAcl([], member.store(), "acl.txt")
    member.store().add([writes("orders")])
    wait_until(lambda: view.allows(ALICE, Operation.WRITE, "orders"))
    assert read_acls(member.session) == [
        {
            "name": "orders",
            "operation": "write",
            "pattern_type": "literal",
            "principal": "alice",
            "resource": "topic",
        }
    ]
    client = member.session.client
    client.set(znodes.ACLS, b"not json")
    time.sleep(0.3)  # the watch fires, logs, and leaves the grants in force alone
    assert view.allows(ALICE, Operation.WRITE, "orders")
    with pytest.raises(CorruptJournalError, match="config/acls"):
        member.store().grants()
    client.set(znodes.ACLS, b'{"version":1,"acls":[{"principal":"alice"}]}')
    with pytest.raises(InvalidConfigError, match="exactly"):
        member.store().grants()
    client.delete(znodes.ACLS)
    wait_until(lambda: not view.allows(ALICE, Operation.WRITE, "orders"))


def test_a_change_too_large_for_zookeeper_is_refused(members: Callable[[], Member]) -> None:
    store = members().store()
    many = [writes(f"topic-with-a-long-name-{n:06d}") for n in range(DOCUMENT_BYTES_MAX // 90)]
    with pytest.raises(InvalidConfigError, match="bytes in ZooKeeper"):
        store.add(many)
    assert store.grants() == ()
