"""A cluster's SCRAM credentials in ZooKeeper (``user_configs``, ``ZooKeeperScramStore``),
on a real ZooKeeper: what one broker sets every broker reads, in Kafka's layout, salted
and hashed only, under the cluster's ACL; a name with ``/`` makes no path; a chroot
holding ``config`` is still joined; a ZooKeeper that does not answer is no refused
password."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from zookeeper_support import SESSION_TIMEOUT_MS

from twinlog.engine.base.errors import BrokerUnavailableError, InvalidConfigError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.credentials import ZooKeeperCredential
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.session import ZooKeeperSession, split_connect_string
from twinlog.engine.zookeeper.user_configs import change_user_config, read_user_config
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.policy.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramError,
    ServerExchange,
    client_key,
    hash_name,
    salted_password,
)
from twinlog.rpc.policy.scram_store import FileScramStore, ZooKeeperScramStore, scram_store_of

OWNER = ZooKeeperCredential("twinlog", "owner-secret-0123456789")
PASSWORD = "correct horse battery"
SALT = b"0123456789abcdef"


class Member:
    """A cluster broker as ``scram_store_of`` sees one: its ZooKeeper metadata store."""

    def __init__(self, connect: str, data_dir: Path, **session_options: object) -> None:
        self.session = ZooKeeperSession(
            connect,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            **session_options,  # type: ignore[arg-type]
        )
        self.metadata = ZooKeeperMetadataStore(self.session, data_dir, 1)
        self.data_dir = data_dir

    def store(self) -> ZooKeeperScramStore:
        store = scram_store_of(self)
        assert isinstance(store, ZooKeeperScramStore)
        return store


@pytest.fixture()
def two_brokers(zk_connect: str, tmp_path: Path) -> Iterator[tuple[Member, Member]]:
    first = Member(zk_connect, tmp_path / "a")
    second = Member(zk_connect, tmp_path / "b")
    yield first, second
    first.session.close()
    second.session.close()


def login(store: ZooKeeperScramStore, user: str, password: str, mechanism: str) -> bytes:
    """A whole SCRAM exchange against ``store``, the client side computed here."""
    exchange = ServerExchange(mechanism, lambda name: store.credential(name, mechanism))
    bare = f"n={user},r=clientnonce"
    server_first = exchange.first(f"n,,{bare}".encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = salted_password(mechanism, password, base64.b64decode(fields["s"]), int(fields["i"]))
    key = client_key(mechanism, salted)
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    name = hash_name(mechanism)
    signature = hmac.new(hashlib.new(name, key).digest(), auth_message, name).digest()
    proof = bytes(a ^ b for a, b in zip(key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    return exchange.final(final)


def test_a_credential_set_through_one_broker_is_every_brokers(
    two_brokers: tuple[Member, Member],
) -> None:
    first, second = two_brokers
    credential = ScramCredential.from_password(SCRAM_SHA_256, PASSWORD, 4096, SALT)
    first.store().set("alice", credential)
    assert second.store().credential("alice", SCRAM_SHA_256) == credential
    assert login(second.store(), "alice", PASSWORD, SCRAM_SHA_256).startswith(b"v=")
    with pytest.raises(ScramError, match="unknown or the password is wrong"):
        login(second.store(), "alice", "not the password", SCRAM_SHA_256)

    second.store().set("alice", ScramCredential.from_password(SCRAM_SHA_512, PASSWORD, 8192))
    second.store().set("bob", ScramCredential.from_password(SCRAM_SHA_512, "x" * 12))
    assert first.store().mechanisms() == {
        "alice": [(SCRAM_SHA_256, 4096), (SCRAM_SHA_512, 8192)],
        "bob": [(SCRAM_SHA_512, 8192)],
    }
    assert first.store().credential("alice", SCRAM_SHA_256) == credential  # kept beside

    assert first.store().delete("alice", SCRAM_SHA_256) is True
    assert second.store().delete("alice", SCRAM_SHA_256) is False
    assert second.store().credential("alice", SCRAM_SHA_256) is None
    assert second.store().delete("alice", SCRAM_SHA_512) is True
    assert first.store().mechanisms() == {"bob": [(SCRAM_SHA_512, 8192)]}
    # A user left without a key has no znode.
    assert first.session.client.exists(znodes.USER_CONFIGS + "/alice") is None


def test_the_znode_is_kafkas_layout_and_keeps_nothing_secret(
    two_brokers: tuple[Member, Member],
) -> None:
    first, _ = two_brokers
    credential = ScramCredential.from_password(SCRAM_SHA_256, PASSWORD, 4096, SALT)
    first.store().set("alice", credential)
    data, _ = first.session.client.get(znodes.USER_CONFIGS + "/alice")
    b64 = base64.b64encode
    assert json.loads(data) == {
        "version": 1,
        "config": {
            SCRAM_SHA_256: (
                f"salt={b64(SALT).decode()},stored_key={b64(credential.stored_key).decode()},"
                f"server_key={b64(credential.server_key).decode()},iterations=4096"
            )
        },
    }
    salted = salted_password(SCRAM_SHA_256, PASSWORD, SALT, 4096)
    key = client_key(SCRAM_SHA_256, salted)
    for secret in (PASSWORD.encode(), salted, b64(salted), key, b64(key)):
        assert secret not in data
    # A key that is not a SCRAM mechanism (one of Kafka's quotas) is kept as found.
    change_user_config(first.session, "alice", lambda old: {**old, "producer_byte_rate": "1024"})
    first.store().set("alice", ScramCredential.from_password(SCRAM_SHA_512, PASSWORD))
    assert first.store().delete("alice", SCRAM_SHA_256) is True
    assert read_user_config(first.session, "alice").keys() == {
        "producer_byte_rate",
        SCRAM_SHA_512,
    }


def test_a_name_with_a_slash_is_escaped_into_one_znode_and_dot_names_are_refused(
    two_brokers: tuple[Member, Member],
) -> None:
    first, second = two_brokers
    credential = ScramCredential.from_password(SCRAM_SHA_256, PASSWORD, 4096)
    for user in ("team/alice", "../cluster_id", "a b*+%é"):
        first.store().set(user, credential)
        assert second.store().credential(user, SCRAM_SHA_256) == credential
    children = set(first.session.client.get_children(znodes.USER_CONFIGS))
    assert children == {"team%2Falice", "..%2Fcluster_id", "a%20b%2A%2B%25%C3%A9"}
    assert set(second.store().mechanisms()) == {"team/alice", "../cluster_id", "a b*+%é"}
    assert first.session.client.get_children(znodes.USER_CONFIGS + "/team%2Falice") == []
    with pytest.raises(ValueError, match="needs a name"):
        first.store().set("", credential)
    for user in (".", ".."):
        with pytest.raises(InvalidConfigError, match="ZooKeeper refuses it as a znode name"):
            first.store().set(user, credential)
    for user in ("", ".", ".."):
        assert first.store().credential(user, SCRAM_SHA_256) is None
        assert first.store().delete(user, SCRAM_SHA_256) is False


def test_a_chroot_holding_config_is_joined_as_the_clusters(zk_connect: str, tmp_path: Path) -> None:
    # Credentials set before any broker made the cluster: config is twinlog's name.
    with ZooKeeperSession(zk_connect) as session:
        ZooKeeperScramStore(session).set(
            "alice", ScramCredential.from_password(SCRAM_SHA_256, PASSWORD)
        )
        creator = ZooKeeperMetadataStore(session, tmp_path / "a", 1)
    with ZooKeeperSession(zk_connect) as session:
        joiner = ZooKeeperMetadataStore(session, tmp_path / "b", 1)
        assert joiner.cluster_id == creator.cluster_id
        assert set(ZooKeeperScramStore(session).mechanisms()) == {"alice"}


@pytest.fixture()
def locked(zookeeper: LocalZooKeeper) -> str:
    """A top-level path of its own: the broker locks every parent it creates."""
    return f"{zookeeper.connect_string}/locked-{uuid.uuid4().hex[:12]}/cluster"


def test_the_znodes_carry_the_clusters_acl(
    zookeeper: LocalZooKeeper, locked: str, tmp_path: Path
) -> None:
    member = Member(locked, tmp_path / "data", credential=OWNER)
    try:
        member.store().set("alice", ScramCredential.from_password(SCRAM_SHA_256, PASSWORD))
    finally:
        member.session.close()
    chroot = split_connect_string(locked)[1]
    paths = [chroot + znodes.CONFIG, chroot + znodes.USER_CONFIGS]
    paths.append(chroot + znodes.USER_CONFIGS + "/alice")
    owner = KazooClient(hosts=zookeeper.connect_string, auth_data=OWNER.auth_data)
    stranger = KazooClient(hosts=zookeeper.connect_string)
    owner.start(timeout=30)
    stranger.start(timeout=30)
    try:
        for path in paths:
            assert owner.get_acls(path)[0] == OWNER.acl, path
            with pytest.raises(NoAuthError):
                stranger.get(path)
    finally:
        for client in (owner, stranger):
            client.stop()
            client.close()


def test_a_zookeeper_that_does_not_answer_is_retriable_not_a_refused_password(
    zk_connect: str, tmp_path: Path
) -> None:
    member = Member(zk_connect, tmp_path / "data")
    store = member.store()
    store.set("alice", ScramCredential.from_password(SCRAM_SHA_256, PASSWORD))
    member.session.close()  # every request now fails as on a lost connection
    with pytest.raises(BrokerUnavailableError, match=r"ZooKeeper session with .* expired"):
        store.credential("alice", SCRAM_SHA_256)
    exchange = ServerExchange(SCRAM_SHA_256, lambda name: store.credential(name, SCRAM_SHA_256))
    with pytest.raises(BrokerUnavailableError):  # not ScramError: nothing says "wrong password"
        exchange.first(b"n,,n=alice,r=clientnonce")


def test_scram_store_of_picks_zookeeper_on_a_cluster_and_the_file_on_one_node(
    two_brokers: tuple[Member, Member], tmp_path: Path
) -> None:
    first, _ = two_brokers
    assert isinstance(scram_store_of(first), ZooKeeperScramStore)
    single = SimpleNamespace(metadata=object(), data_dir=tmp_path / "single")
    assert isinstance(scram_store_of(single), FileScramStore)
    assert scram_store_of(SimpleNamespace()) is None
