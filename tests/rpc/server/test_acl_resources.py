"""The ACL model without a server: group grants, internal topics, producer-id owners."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinlog.engine.base.errors import AuthorizationError, InvalidConfigError
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.broker.producer_owner import idempotent_transactional_id, owner_of
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.policy.auth import Acl, Guard, Operation, Principal, Resource
from twinlog.rpc.policy.producer_access import TransactionalAccess

ALICE, BOB, OPS = Principal("alice"), Principal("bob"), Principal("ops")


def _acl(tmp_path: Path, text: str) -> Acl:
    (tmp_path / "acl").write_text(text)
    return Acl.load(tmp_path / "acl")


def test_group_grants_name_groups_only(tmp_path: Path) -> None:
    acl = _acl(tmp_path, "alice read group:billing*\nalice read *\nops all group:*\nops all *\n")
    assert acl.allows(ALICE, Operation.READ, "billing-eu", Resource.GROUP)
    assert not acl.allows(ALICE, Operation.READ, "payroll", Resource.GROUP)  # 'read *' is topics
    assert acl.allows(ALICE, Operation.READ, "billing-eu")  # ...as a topic, through 'read *'
    assert not acl.allows(BOB, Operation.READ, "billing-eu", Resource.GROUP)
    assert acl.allows(OPS, Operation.DESCRIBE, "anything", Resource.GROUP)
    guard = Guard(None, acl, mutual_tls=False)
    assert guard.may_describe(ALICE, "billing-eu", Resource.GROUP)  # read implies describe
    assert not guard.may_describe(ALICE, "payroll", Resource.GROUP)
    with pytest.raises(AuthorizationError, match="'bob read group:billing-eu'"):
        guard.require(BOB, Operation.READ, ["billing-eu"], Resource.GROUP)


def test_only_the_first_prefix_names_the_resource(tmp_path: Path) -> None:
    acl = _acl(tmp_path, "alice write transactional-id:group:x\n")
    assert acl.allows(ALICE, Operation.WRITE, "group:x", Resource.TRANSACTIONAL_ID)
    assert not acl.allows(ALICE, Operation.READ, "x", Resource.GROUP)


def test_all_on_topics_grants_no_group(tmp_path: Path) -> None:
    acl = _acl(tmp_path, "root all *\n")
    assert not acl.allows(Principal("root"), Operation.READ, "g", Resource.GROUP)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("alice write group:x\n", "'write' does not apply to groups"),
        ("alice create group:x\n", "write 'alice create x'"),
        ("alice read group:\n", "pattern is empty"),
        ("alice idempotent-write orders\n", r"'alice idempotent-write cluster:\*'"),
    ],
)
def test_bad_group_grants_are_refused(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        _acl(tmp_path, line)


def test_internal_topics_need_a_pattern_naming_them(tmp_path: Path) -> None:
    acl = _acl(tmp_path, "alice read *\nalice all *\nops read __consumer_offsets\naudit read __*\n")
    assert not acl.allows(ALICE, Operation.READ, "__consumer_offsets")
    assert not acl.allows(ALICE, Operation.CREATE, "__shadow")
    assert acl.allows(ALICE, Operation.READ, "orders")
    assert acl.allows(OPS, Operation.READ, "__consumer_offsets")
    assert acl.allows(Principal("audit"), Operation.READ, "__consumer_offsets")
    guard = Guard(None, acl, mutual_tls=False)
    with pytest.raises(AuthorizationError, match="__consumer_offsets is internal"):
        guard.require(ALICE, Operation.READ, ["__consumer_offsets"])
    Guard(None, None, mutual_tls=False).require(ALICE, Operation.READ, ["__consumer_offsets"])


def test_idempotent_ids_name_their_owner() -> None:
    assert owner_of(idempotent_transactional_id(7, "alice@example.com")) == "alice@example.com"
    assert owner_of(idempotent_transactional_id(7)) is None  # made without authentication
    assert owner_of("alice-app") is None  # a transactional id has no owner: ACLs decide


class Directory:
    """The broker's producer table, as the server sees it."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def transactional_id_of(self, producer_id: int) -> str | None:
        return self.names.get(producer_id)

    def init_producer(
        self,
        transactional_id: str | None = None,
        transaction_timeout_ms: int | None = None,
        owner: str | None = None,
    ) -> ProducerIdentity:
        producer_id = 256 * (len(self.names) + 1)
        self.names[producer_id] = transactional_id or idempotent_transactional_id(
            producer_id, owner
        )
        return ProducerIdentity(producer_id, 0)


def test_a_batch_carries_only_its_senders_producer_id(tmp_path: Path) -> None:
    acl = _acl(tmp_path, "alice write *\nbob write *\nalice write transactional-id:alice-*\n")
    directory = Directory()
    access = TransactionalAccess(Guard(None, acl, mutual_tls=False), directory)  # type: ignore[arg-type]
    mine = access.init_producer(ALICE, None, None)
    ours = build_batch([b"v"], producer_id=mine.producer_id, producer_generation=0)
    access.require_batch(ALICE, ours)
    with pytest.raises(AuthorizationError, match=f"producer id {mine.producer_id} was not given"):
        access.require_batch(BOB, ours)
    newer = build_batch([b"v"], producer_id=mine.producer_id, producer_generation=1)
    with pytest.raises(AuthorizationError, match="with generation 1 was not given"):
        access.require_batch(ALICE, newer)
    with pytest.raises(AuthorizationError, match="producer id 9999 was not given"):
        access.require_batch(ALICE, build_batch([b"v"], producer_id=9999, producer_generation=0))
    access.require_batch(BOB, build_batch([b"v"]))  # no producer id: nothing to own
    unowned = directory.init_producer(None)  # as issued before owners were recorded
    with pytest.raises(AuthorizationError, match="carry no owner"):
        access.require_batch(
            ALICE, build_batch([b"v"], producer_id=unowned.producer_id, producer_generation=0)
        )
    transactional = access.init_producer(ALICE, "alice-app", None)
    plain = build_batch([b"v"], producer_id=transactional.producer_id, producer_generation=0)
    access.require_batch(ALICE, plain)
    with pytest.raises(AuthorizationError, match="may not write the transactional id"):
        access.require_batch(BOB, plain)
    open_access = TransactionalAccess(Guard(None, None, mutual_tls=False), directory)  # type: ignore[arg-type]
    open_access.require_batch(BOB, ours)  # without ACLs nothing is checked, as before
