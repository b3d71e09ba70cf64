"""What a broker checks in its chroot before it writes there: ``read_cluster_before_join``.

A broker pointed at the wrong place must be refused before its first write, or it
leaves a cluster id, parents and registrations in someone else's tree (or, with
ACLs, znodes the rightful cluster cannot read). So the join only reads, and refuses
with InvalidConfigError, saying what it found and what to do, when:

- the chroot holds names a twinlog cluster never makes there (``znodes.TOP_LEVEL``):
  another application's tree, e.g. Kafka's ``cluster`` and ``latest_producer_id_block``
  (``admin`` and ``config`` are twinlog's too, as Kafka's: requests to the controller,
  SCRAM credentials);
- ZooKeeper refuses this session's reads there (NoAuth): the cluster was locked with
  another credential, or this broker was given none;
- the ACL of the chroot, ``cluster_id`` or a top-level parent does not give this
  session read, write, create and delete (the ACLs it can judge: ``world:anyone`` and
  its own digest identity; an entry of another scheme, e.g. ``sasl`` or ``ip``, is
  trusted, and a refusal then comes as NoAuth on the first write);
- with a credential, a znode the cluster made is open to anyone: the cluster was
  started without a credential, and this broker's znodes would be unreadable to the
  brokers that still run without one (lock the whole tree first: docs/zookeeper.md).

The data directory's cluster is compared by the caller (``data_dir_identity``). A
chroot with none of this, empty or holding only twinlog's names without a cluster id
(brokers registered before any store was opened), is joined as before.
"""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.security import ACL, Permissions

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.credentials import describe_acl
from twinlog.engine.zookeeper.session import ZooKeeperSession, split_connect_string

CLUSTER_KEYS = ("cluster_id", "journal_partitions")
ZOOKEEPER_OWN = "zookeeper"  # ZooKeeper's own znode, seen below "/" when there is no chroot
NEEDED_PERMISSIONS = Permissions.READ | Permissions.WRITE | Permissions.CREATE | Permissions.DELETE
JUDGED_SCHEMES = ("world", "digest")
FOREIGN_NAMES_SHOWN = 8


def read_cluster_before_join(session: ZooKeeperSession) -> dict[str, Any] | None:
    """The cluster znode's value (``cluster_id``, ``journal_partitions``) in the
    session's chroot, or None when there is no cluster yet. Reads only.

    InvalidConfigError for a chroot this broker must not join (module docstring);
    CorruptJournalError for a ``cluster_id`` that does not parse."""
    where = _where(session)
    client = session.client
    children = set(_read(session, "/", lambda: session.wait(client.get_children_async("/"))))
    foreign = sorted(children - znodes.TOP_LEVEL - {ZOOKEEPER_OWN})
    if foreign:
        shown = ", ".join(foreign[:FOREIGN_NAMES_SHOWN])
        more = (
            f" and {len(foreign) - FOREIGN_NAMES_SHOWN} more"
            if len(foreign) > FOREIGN_NAMES_SHOWN
            else ""
        )
        raise InvalidConfigError(
            f"{where} holds znodes that are not a twinlog cluster's ({shown}{more}; twinlog "
            f"makes only {', '.join(sorted(znodes.TOP_LEVEL))} there): another application's "
            "tree? Give the brokers a chroot of their own (HOST:PORT/CHROOT), or remove those "
            "znodes if they are leftovers; nothing was written"
        )
    _check_acl(session, "/", operator_made=True)
    for name in sorted(children & znodes.TOP_LEVEL):
        _check_acl(session, "/" + name, operator_made=False)
    if "cluster_id" not in children:
        return None
    try:
        data, _ = _read(
            session,
            znodes.CLUSTER_ID,
            lambda: session.wait(client.get_async(znodes.CLUSTER_ID)),
        )
    except NoNodeError:  # deleted since the listing: by hand, so take it as absent
        return None
    return znodes.decode(znodes.CLUSTER_ID, data, CLUSTER_KEYS)


def _where(session: ZooKeeperSession) -> str:
    hosts, chroot = split_connect_string(session.connect)
    return f"ZooKeeper chroot {chroot or '/'} at {hosts}"


def _read(session: ZooKeeperSession, path: str, request: Any) -> Any:
    try:
        return request()
    except NoAuthError:
        raise InvalidConfigError(
            f"{_where(session)}: ZooKeeper refused to let {session.describe_identity()} read "
            f"{path} (NoAuth): its znodes are locked with another credential. Give this "
            "broker the cluster's ZooKeeper credentials file (the one the other brokers were "
            "given), or point it at another chroot; nothing was written"
        ) from None


def _check_acl(session: ZooKeeperSession, path: str, *, operator_made: bool) -> None:
    """Refuse ``path`` if its ACL denies this session what a broker does there, or (with a
    credential, on a znode twinlog made: ``operator_made`` false) gives anyone anything."""
    entries: list[ACL]
    entries, _ = _read(session, path, lambda: session.wait(session.client.get_acls_async(path)))
    if any(entry.id.scheme not in JUDGED_SCHEMES for entry in entries):
        return  # an identity this session may hold that is not ours to judge (module docstring)
    credential = session.credential
    granted = 0
    for entry in entries:
        if entry.id.scheme == "world" and entry.id.id == "anyone":
            granted |= entry.perms
        elif credential is not None:
            granted |= credential.grants(entry)
    shown = path if path != "/" else "the chroot"
    if granted & NEEDED_PERMISSIONS != NEEDED_PERMISSIONS:
        raise InvalidConfigError(
            f"{_where(session)}: the ACL of {shown} ({describe_acl(entries)}) does not let "
            f"{session.describe_identity()} read, write, create and delete there: the cluster "
            "was locked with another credential. Give this broker the cluster's ZooKeeper "
            "credentials file, or point it at another chroot; nothing was written"
        )
    open_to_anyone = any(entry.id.scheme == "world" and entry.perms for entry in entries)
    if credential is not None and open_to_anyone and not operator_made:
        raise InvalidConfigError(
            f"{_where(session)}: {shown} is open to anyone ({describe_acl(entries)}): this "
            f"cluster was started without a ZooKeeper credential, and this broker has one "
            f"({credential}); its znodes would be unreadable to the others. Stop the cluster "
            "and lock its tree first (docs/zookeeper.md, 'Locking ZooKeeper down'), or start "
            "this broker without the credential; nothing was written"
        )
