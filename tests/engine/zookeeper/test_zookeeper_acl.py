"""ZooKeeper locked down, on a real ZooKeeper: with a credential every znode the cluster
makes (chroot and its missing parents included) carries the digest ACL and nothing else;
a client without the credential, or with a wrong password, can neither read nor write
them; and a broker that is not the cluster's (another credential, none, a foreign tree,
a data directory of another cluster, an unlocked cluster) is refused at join having
written nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl
from zookeeper_support import SESSION_TIMEOUT_MS, wait_until

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.transactions.id_source import ID_KINDS
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.broker_registration import register_broker
from twinlog.engine.zookeeper.controlled_shutdown import request_controlled_shutdown
from twinlog.engine.zookeeper.controller import Controller
from twinlog.engine.zookeeper.credentials import ZooKeeperCredential
from twinlog.engine.zookeeper.id_source import ZooKeeperIdSource
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.partition_state import read_topic_partition_states
from twinlog.engine.zookeeper.session import ZooKeeperSession, split_connect_string
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

OWNER = ZooKeeperCredential("twinlog", "owner-secret-0123456789")
WRONG_PASSWORD = ZooKeeperCredential("twinlog", "not-the-owner-secret-0")
OTHER_USER = ZooKeeperCredential("intruder", "owner-secret-0123456789")

Snapshot = dict[str, tuple[bytes, int, int, int, str]]


@pytest.fixture()
def locked(zookeeper: LocalZooKeeper) -> str:
    """``127.0.0.1:PORT/locked-<random>/cluster``: a top-level path of its own, because the
    broker locks every parent it creates (the tests' shared ``/twinlog`` must stay open)."""
    return f"{zookeeper.connect_string}/locked-{uuid.uuid4().hex[:12]}/cluster"


@pytest.fixture()
def owner(zookeeper: LocalZooKeeper) -> Iterator[KazooClient]:
    """A plain kazoo client authenticated as the cluster's credential, at the root."""
    client = KazooClient(hosts=zookeeper.connect_string, auth_data=OWNER.auth_data)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def top_of(connect: str) -> str:
    """``/locked-<random>``: the first znode of the chroot path."""
    return "/" + split_connect_string(connect)[1].split("/")[1]


def walk(client: KazooClient, path: str) -> Iterator[str]:
    yield path
    for child in sorted(client.get_children(path)):
        yield from walk(client, f"{path.rstrip('/')}/{child}")


def snapshot(client: KazooClient, root: str) -> Snapshot:
    """Every znode below ``root``: data, mzxid (changed), cversion (children added or
    removed), aversion (ACL changed) and its ACL, to tell that nothing was written."""
    taken: Snapshot = {}
    for path in walk(client, root):
        data, stat = client.get(path)
        acl, _ = client.get_acls(path)
        taken[path] = (data, stat.mzxid, stat.cversion, stat.aversion, repr(acl))
    return taken


def open_cluster(connect: str, data_dir: Path, credential: ZooKeeperCredential | None) -> None:
    """A broker's whole life on ZooKeeper, so that every kind of znode exists: the cluster,
    a topic with partition states from the controller, id blocks, a checkpoint pointer,
    a registration and a controlled shutdown request (the ephemerals are gone after)."""
    with ZooKeeperSession(
        connect, session_timeout_ms=SESSION_TIMEOUT_MS, credential=credential
    ) as session:
        store = ZooKeeperMetadataStore(session, data_dir, 1)
        store.add_topic("orders", 2, {})
        ids = ZooKeeperIdSource(session)
        for kind in ID_KINDS:
            ids.next(kind)
        store.checkpoint_pointers(0).write(CheckpointPointer(10, 5))
        register_broker(session, 1, "127.0.0.1", 9001, store.data_dir_id)
        controller = Controller(session, 1, full_read_interval_s=0.5).start()
        try:
            wait_until(
                lambda: len(read_topic_partition_states(session, "orders")) == 2,
                what="the controller created the partition states",
            )
            request_controlled_shutdown(session, 1, timeout_ms=100)
            expected = OPEN_ACL_UNSAFE if credential is None else credential.acl
            wait_until(lambda: session.client.exists(znodes.CONTROLLER), what="a controller")
            for ephemeral in (
                znodes.broker_path(1),
                znodes.shutting_down_path(1),
                znodes.CONTROLLER,
            ):
                assert session.client.get_acls(ephemeral)[0] == expected, ephemeral
        finally:
            controller.close()


def client_as(zookeeper: LocalZooKeeper, credential: ZooKeeperCredential | None) -> KazooClient:
    auth = [] if credential is None else credential.auth_data
    client = KazooClient(hosts=zookeeper.connect_string, auth_data=auth)
    client.start(timeout=30)
    return client


def test_every_znode_of_a_locked_cluster_carries_the_digest_acl_only(
    locked: str, owner: KazooClient, tmp_path: Path
) -> None:
    open_cluster(locked, tmp_path / "data", OWNER)
    tree = list(walk(owner, top_of(locked)))
    chroot = split_connect_string(locked)[1]
    expected = [
        chroot,
        chroot + znodes.CLUSTER_ID,
        chroot + znodes.CONTROLLER_EPOCH,
        chroot + znodes.coordinator_path(0),
        chroot + znodes.BROKER_IDS,
        chroot + znodes.SHUTTING_DOWN,
        chroot + znodes.partition_state_path("orders", 1),
    ] + [chroot + znodes.id_block_path(kind) for kind in ID_KINDS]
    assert set(expected) <= set(tree), tree
    for path in tree:
        acl, _ = owner.get_acls(path)
        assert acl == OWNER.acl, (path, acl)


@pytest.mark.parametrize("credential", [None, WRONG_PASSWORD, OTHER_USER])
def test_a_client_without_the_credential_can_neither_read_nor_write(
    zookeeper: LocalZooKeeper,
    locked: str,
    owner: KazooClient,
    tmp_path: Path,
    credential: ZooKeeperCredential | None,
) -> None:
    open_cluster(locked, tmp_path / "data", OWNER)
    tree = list(walk(owner, top_of(locked)))
    before = snapshot(owner, top_of(locked))
    stranger = client_as(zookeeper, credential)
    try:
        for path in tree:
            attempts: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
                (stranger.get, (path,)),
                (stranger.get_children, (path,)),
                (stranger.get_acls, (path,)),
                (stranger.set, (path, b"{}")),
                (stranger.create, (f"{path}/planted", b"x")),
                (stranger.set_acls, (path, OPEN_ACL_UNSAFE)),
            ]
            for call, arguments in attempts:
                with pytest.raises(NoAuthError):
                    call(*arguments)
        leaf = tree[-1]
        with pytest.raises(NoAuthError):
            stranger.delete(leaf)
    finally:
        stranger.stop()
        stranger.close()
    assert snapshot(owner, top_of(locked)) == before


@pytest.mark.parametrize("credential", [None, WRONG_PASSWORD, OTHER_USER])
def test_a_broker_with_another_credential_is_refused_at_join_and_writes_nothing(
    locked: str,
    owner: KazooClient,
    tmp_path: Path,
    credential: ZooKeeperCredential | None,
) -> None:
    open_cluster(locked, tmp_path / "data", OWNER)
    before = snapshot(owner, top_of(locked))
    # Refused by the session (it may not even see the chroot) or by the store (it may
    # see it but not read it): either way before the first write.
    with pytest.raises(InvalidConfigError, match=r"NoAuth.*credentials file") as refused:
        with ZooKeeperSession(locked, credential=credential) as session:
            ZooKeeperMetadataStore(session, tmp_path / "other-data", 1)
    message = str(refused.value)
    assert "locked with another credential" in message and "nothing was written" in message
    assert OWNER.password not in message and "secret" not in message
    assert snapshot(owner, top_of(locked)) == before
    assert not (tmp_path / "other-data").exists()  # the data directory was not claimed


def test_a_second_broker_with_the_credential_joins_the_same_cluster(
    locked: str, tmp_path: Path
) -> None:
    with (
        ZooKeeperSession(locked, credential=OWNER) as first,
        ZooKeeperSession(locked, credential=OWNER) as second,
    ):
        creator = ZooKeeperMetadataStore(first, tmp_path / "a", 2)
        joiner = ZooKeeperMetadataStore(second, tmp_path / "b", 2)
        assert joiner.cluster_id == creator.cluster_id
        creator.add_topic("orders", 1, {})
        assert joiner.get_topic("orders").partitions == 1
        reopened = ZooKeeperMetadataStore(second, tmp_path / "a", 2)  # a restart
        assert reopened.data_dir_id == creator.data_dir_id


def test_a_chroot_holding_another_applications_znodes_is_refused_and_left_alone(
    zookeeper: LocalZooKeeper, zk_connect: str, tmp_path: Path
) -> None:
    chroot = split_connect_string(zk_connect)[1]
    with ZooKeeperSession(zookeeper.connect_string) as bare:
        for path in ("/brokers/ids", "/config/topics", "/admin", "/cluster/id"):  # Kafka's
            bare.client.create(chroot + path, b"kafka", makepath=True)
        before = snapshot(bare.client, chroot)
        for session_options in ({}, {"credential": OWNER}):
            with ZooKeeperSession(zk_connect, **session_options) as session:
                with pytest.raises(
                    InvalidConfigError,
                    # /admin and /config are twinlog's too (preferred-leader requests,
                    # SCRAM credentials: as Kafka's)
                    match=r"not a twinlog cluster's \(cluster; .*nothing was written",
                ):
                    ZooKeeperMetadataStore(session, tmp_path / "data", 1)
        assert snapshot(bare.client, chroot) == before
    assert not (tmp_path / "data").exists()


def test_a_data_directory_of_another_cluster_is_refused_before_any_write(
    zookeeper: LocalZooKeeper, zk_connect: str, tmp_path: Path
) -> None:
    with ZooKeeperSession(zk_connect) as session:
        first = ZooKeeperMetadataStore(session, tmp_path / "data", 1)
    empty = zk_connect + "-empty"
    with ZooKeeperSession(empty) as session:
        with pytest.raises(
            InvalidConfigError, match=f"belongs to cluster {first.cluster_id}.*holds no cluster"
        ):
            ZooKeeperMetadataStore(session, tmp_path / "data", 1)
        assert session.client.get_children("/") == []  # no cluster id left behind
    other = zk_connect + "-other"
    with ZooKeeperSession(other) as session:
        second = ZooKeeperMetadataStore(session, tmp_path / "other-data", 1)
        session.client.delete(znodes.ID_BLOCKS)  # a parent the join would make again
        before = snapshot(session.client, "/")
        with pytest.raises(
            InvalidConfigError, match=f"holds cluster {second.cluster_id}.*nothing was written"
        ):
            ZooKeeperMetadataStore(session, tmp_path / "data", 1)
        assert snapshot(session.client, "/") == before


def test_a_broker_with_a_credential_refuses_a_cluster_started_without_one(
    zk_connect: str, tmp_path: Path
) -> None:
    with ZooKeeperSession(zk_connect) as open_session:
        ZooKeeperMetadataStore(open_session, tmp_path / "a", 1)
        open_session.client.delete(znodes.ID_BLOCKS)
        before = snapshot(open_session.client, "/")
        with ZooKeeperSession(zk_connect, credential=OWNER) as session:
            with pytest.raises(InvalidConfigError, match=r"open to anyone.*lock its tree first"):
                ZooKeeperMetadataStore(session, tmp_path / "b", 1)
        assert snapshot(open_session.client, "/") == before


def test_a_parent_its_credential_may_only_read_is_refused_before_any_write(
    locked: str, owner: KazooClient, tmp_path: Path
) -> None:
    with ZooKeeperSession(locked, credential=OWNER) as session:
        ZooKeeperMetadataStore(session, tmp_path / "data", 1)
        chroot = split_connect_string(locked)[1]
        owner.set_acls(
            chroot + znodes.TOPICS, [make_digest_acl("twinlog", OWNER.password, read=True)]
        )
        owner.delete(chroot + znodes.ID_BLOCKS)
        before = snapshot(owner, top_of(locked))
        with pytest.raises(InvalidConfigError, match=r"ACL of /topics \(digest:twinlog:r\)"):
            ZooKeeperMetadataStore(session, tmp_path / "data", 1)
        assert snapshot(owner, top_of(locked)) == before


def test_a_chroot_below_a_parent_locked_by_another_credential_is_a_clear_error(
    locked: str, tmp_path: Path
) -> None:
    with ZooKeeperSession(locked, credential=OWNER):
        pass  # creates /locked-<random>/cluster, both locked
    beside = locked.rsplit("/", 1)[0] + "/beside"
    for credential in (None, OTHER_USER):
        with pytest.raises(InvalidConfigError, match=r"refused to create /locked-.*/beside"):
            ZooKeeperSession(beside, credential=credential)


def test_an_open_chroot_made_by_the_operator_is_joined_and_its_locked_tree_refused(
    zookeeper: LocalZooKeeper, locked: str, owner: KazooClient, tmp_path: Path
) -> None:
    chroot = split_connect_string(locked)[1]
    owner.ensure_path(chroot, acl=OPEN_ACL_UNSAFE)  # made beforehand, open, as an admin may
    open_cluster(locked, tmp_path / "data", OWNER)  # joined: an open chroot is the operator's
    assert owner.get_acls(chroot)[0] == OPEN_ACL_UNSAFE
    before = snapshot(owner, chroot)
    for credential in (None, OTHER_USER):
        with ZooKeeperSession(locked, credential=credential) as session:  # may see the chroot
            with pytest.raises(InvalidConfigError, match=r"read /brokers \(NoAuth\)"):
                ZooKeeperMetadataStore(session, tmp_path / "other-data", 1)
    assert snapshot(owner, chroot) == before
