"""Where the grants made at run time are kept: ``AclStore``; on a single node
``FileAclStore``, the file ``DATA_DIR/acls`` (mode 600); on a cluster
``ZooKeeperAclStore``, the znode ``config/acls`` below the cluster's chroot
(``twinlog.engine.zookeeper.acl_znode``), watched by every broker.

    {"version": 1, "acls": [{"principal": "alice", "operation": "write", "resource": "topic",
                             "name": "orders", "pattern_type": "literal"}]}

Each entry is a binding of ``acl_bindings`` (checked when added and when read). The file
is replaced atomically (``replace_file``, with a CRC-32C line); both doors of a server
share its one store (``acl_store_of``), which tells its watchers of each change it
makes. On a cluster a change is one conditional write of the znode, and every broker's
watch hears of it (within ZooKeeper's notification delay, milliseconds).

Adding a grant already stored, or removing one that is not, changes nothing: ``add`` and
``remove`` answer what they changed.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import CorruptJournalError, InvalidConfigError
from twinlog.engine.zookeeper.acl_znode import AclWatch, Entries, change_acls, read_acls
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.policy.acl_bindings import binding_of_json, binding_to_json, check_binding
from twinlog.rpc.policy.auth import Grant
from twinlog.rpc.policy.store_place import OnePerPath, store_place

log = logging.getLogger(__name__)

FILE_NAME = "acls"
FORMAT_VERSION = 1
FILE_MODE = 0o600

# How long a change waits for this broker's watch to apply it (ZooKeeper's notification
# takes milliseconds; a session being re-established can take its timeout).
TOLD_WAIT_S = 10.0

# Told the grants now and after each change; it answers False once it wants no more.
Watcher = Callable[[tuple[Grant, ...]], bool]


class AclStore(Protocol):
    where: str  # where the grants are kept, for messages

    def grants(self) -> tuple[Grant, ...]: ...

    def add(self, grants: Sequence[Grant]) -> list[Grant]:
        """Store ``grants`` (each checked first: none is stored if one is refused); the
        ones that were not stored already."""
        ...

    def remove(self, grants: Sequence[Grant]) -> list[Grant]:
        """The ones of ``grants`` that were stored, removed."""
        ...

    def watch(self, on_change: Watcher) -> None:
        """``on_change(grants)`` now and after every change, until it answers False."""
        ...


def _added(old: Sequence[Grant], grants: Sequence[Grant]) -> tuple[list[Grant], list[Grant]]:
    """(every grant after adding ``grants``, the ones new)."""
    for grant in grants:
        check_binding(grant)
    new = [grant for grant in dict.fromkeys(grants) if grant not in old]
    return [*old, *new], new


def _removed(old: Sequence[Grant], grants: Sequence[Grant]) -> tuple[list[Grant], list[Grant]]:
    gone = set(grants)
    return [grant for grant in old if grant not in gone], [g for g in old if g in gone]


def _grants_of(entries: Entries, where: str) -> list[Grant]:
    return [binding_of_json(entry, f"{where} entry {n}") for n, entry in enumerate(entries, 1)]


class FileAclStore:
    """Thread rule: any thread; changes hold the store's lock (one store per path in a
    process: ``file_acl_store``). Watchers are called after the lock is released."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.where = f"ACL store {self.path}"
        self._lock = threading.Lock()
        self._watchers: list[Watcher] = []
        self._grants = tuple(self._read())

    def grants(self) -> tuple[Grant, ...]:
        return self._grants

    def add(self, grants: Sequence[Grant]) -> list[Grant]:
        with self._lock:
            every, new = _added(self._grants, grants)
            if new:
                self._write(every)
        if new:
            self._tell()
        return new

    def remove(self, grants: Sequence[Grant]) -> list[Grant]:
        with self._lock:
            kept, gone = _removed(self._grants, grants)
            if gone:
                self._write(kept)
        if gone:
            self._tell()
        return gone

    def watch(self, on_change: Watcher) -> None:
        if on_change(self._grants):
            with self._lock:
                self._watchers.append(on_change)

    def _tell(self) -> None:
        current = self._grants
        with self._lock:
            watchers = list(self._watchers)
        done = [watcher for watcher in watchers if not watcher(current)]
        if done:
            with self._lock:
                self._watchers = [w for w in self._watchers if w not in done]

    def _read(self) -> list[Grant]:
        try:
            document: Any = json.loads(read_checked(self.path))
            if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
                raise ValueError("not a version 1 document")
            return _grants_of(document["acls"], self.where)
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError, InvalidConfigError) as error:
            raise CorruptJournalError(
                f"the ACL store {self.path} cannot be read ({error}): restore it from a "
                "backup, or move it away and add the grants again with 'twinlog acls add'"
            ) from None

    def _write(self, grants: list[Grant]) -> None:
        document = {"version": FORMAT_VERSION, "acls": [binding_to_json(g) for g in grants]}
        contents = json.dumps(document, indent=1, sort_keys=True).encode()
        replace_file(self.path, with_checksum(contents), mode=FILE_MODE)
        self._grants = tuple(grants)


class ZooKeeperAclStore:
    """The grants of a cluster, in ZooKeeper (module docstring). Thread rule: any thread;
    changes are conditional writes, so brokers that change the grants at once each see
    their change applied on top of the other's.

    A change returns once this broker's watchers were told of it (read your writes, as
    Kafka's authorizer updates its own cache as it writes): a CreateAcls followed by a
    DescribeAcls on the same broker sees the grant, not the state before the watch
    fired. Bounded by ``TOLD_WAIT_S``: the change is in ZooKeeper either way."""

    def __init__(self, session: ZooKeeperSession) -> None:
        self.session = session
        self.where = f"ZooKeeper znode config/acls ({session.connect})"
        # The grants the watchers were last told (None: no watcher yet, nobody to wait for).
        self._told: tuple[Grant, ...] | None = None
        self._told_changed = threading.Condition()

    def grants(self) -> tuple[Grant, ...]:
        return tuple(_grants_of(read_acls(self.session), self.where))

    def add(self, grants: Sequence[Grant]) -> list[Grant]:
        for grant in grants:
            check_binding(grant)
        new: list[Grant] = []

        def adding(entries: Entries) -> Entries:
            every, fresh = _added(_grants_of(entries, self.where), grants)
            new[:] = fresh
            return [binding_to_json(grant) for grant in every]

        change_acls(self.session, adding)
        if new:
            self._wait_told(lambda told: all(grant in told for grant in new), "added")
        return new

    def remove(self, grants: Sequence[Grant]) -> list[Grant]:
        gone: list[Grant] = []

        def removing(entries: Entries) -> Entries:
            kept, removed = _removed(_grants_of(entries, self.where), grants)
            gone[:] = removed
            return [binding_to_json(grant) for grant in kept]

        change_acls(self.session, removing)
        if gone:
            self._wait_told(lambda told: not any(grant in told for grant in gone), "removed")
        return gone

    def watch(self, on_change: Watcher) -> None:
        def on_entries(entries: Entries) -> bool:
            grants = tuple(_grants_of(entries, self.where))
            wanted = on_change(grants)
            with self._told_changed:
                self._told = grants
                self._told_changed.notify_all()
            return wanted

        AclWatch(self.session, on_entries)

    def _wait_told(self, done: Callable[[tuple[Grant, ...]], bool], what: str) -> None:
        """Until the watchers were told grants that ``done`` accepts (see the class)."""
        deadline = time.monotonic() + TOLD_WAIT_S
        with self._told_changed:
            while self._told is not None and not done(self._told):
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    # Another broker's change may have undone this one meanwhile: the
                    # watch applies whatever ZooKeeper holds last.
                    log.warning(
                        "%s: the grants %s are in ZooKeeper, but this broker's watch did not "
                        "apply them within %.0f s",
                        self.where,
                        what,
                        TOLD_WAIT_S,
                    )
                    return
                self._told_changed.wait(remaining_s)


_file_stores = OnePerPath(FILE_NAME, FileAclStore)
_zookeeper_stores: weakref.WeakKeyDictionary[ZooKeeperSession, ZooKeeperAclStore] = (
    weakref.WeakKeyDictionary()
)
_stores_lock = threading.Lock()


def file_acl_store(data_dir: str | os.PathLike[str]) -> FileAclStore:
    """The one store of ``data_dir`` in this process."""
    return _file_stores.of(data_dir)


def acl_store_of(broker: object) -> AclStore | None:
    """A cluster member's store in ZooKeeper (its metadata store is ZooKeeper's), else the
    store of the broker's data directory; None for a broker with neither (a test double,
    a remote broker): grants are then only the ACL file's."""
    place = store_place(broker)
    if not isinstance(place, ZooKeeperSession):
        return None if place is None else file_acl_store(place)
    with _stores_lock:
        found = _zookeeper_stores.get(place)
        if found is None:
            found = _zookeeper_stores[place] = ZooKeeperAclStore(place)
        return found
