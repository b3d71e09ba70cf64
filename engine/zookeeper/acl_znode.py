"""The grants made at run time on a cluster, in one znode: ``config/acls``.

    config/acls   {"acls":[{"name":"orders","operation":"write","pattern_type":"literal",
                   "principal":"alice","resource":"topic"}],"version":1}

One znode, so that a change is one conditional write (read again after a lost race) and
one data watch tells every broker of every change (``AclWatch``). What an entry means is
the policy floor's (``twinlog.rpc.policy.acl_bindings``); here it is a JSON object of
strings. ZooKeeper refuses a znode over its ``jute.maxbuffer`` (1 MiB by default): a change
that would make the document larger than ``DOCUMENT_BYTES_MAX`` is refused
(InvalidConfigError), about 8000 grants.

Thread rule: any thread; every call waits at most the session's request timeout
(ZooKeeperUnavailableError, retriable). ``AclWatch`` calls back on kazoo's event thread
(its callback must not block).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from twinlog.engine.base.errors import (
    ConditionalWriteLostError,
    CorruptJournalError,
    InvalidConfigError,
)
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession

FORMAT_VERSION = 1
KEYS = ("version", "acls")
DOCUMENT_BYTES_MAX = 900 * 1024  # under ZooKeeper's default jute.maxbuffer of 1 MiB
CHANGE_ATTEMPTS_MAX = 100
log = logging.getLogger(__name__)

Entries = list[dict[str, str]]


def decode_acls(data: bytes) -> Entries:
    value = znodes.decode(znodes.ACLS, data, KEYS)
    entries = value["acls"]
    if value["version"] != FORMAT_VERSION or not (
        isinstance(entries, list)
        and all(
            isinstance(entry, dict) and all(isinstance(v, str) for v in entry.values())
            for entry in entries
        )
    ):
        raise CorruptJournalError(
            f"ZooKeeper znode {znodes.ACLS} does not hold what twinlog wrote there (version "
            f"{value['version']!r}, expected {FORMAT_VERSION}, and a list of objects of "
            "strings as acls). Was it changed by hand? Restore it, or delete it and add the "
            "grants again"
        )
    return [dict(entry) for entry in entries]


def _encode(entries: Entries) -> bytes:
    data = znodes.encode({"version": FORMAT_VERSION, "acls": entries})
    if len(data) > DOCUMENT_BYTES_MAX:
        raise InvalidConfigError(
            f"the cluster's ACLs would take {len(data)} bytes in ZooKeeper, more than "
            f"{DOCUMENT_BYTES_MAX}: use PREFIXED grants or '*' principals to need fewer"
        )
    return data


def read_acls(session: ZooKeeperSession) -> Entries:
    try:
        data, _ = session.wait(session.client.get_async(znodes.ACLS))
    except NoNodeError:
        return []
    return decode_acls(data)


def change_acls(session: ZooKeeperSession, change: Callable[[Entries], Entries]) -> Entries:
    """Write ``change(entries)`` over the cluster's entries, conditional on what was read
    (``change`` may be called again after a lost race, so it must be pure); nothing is
    written when it changes nothing. Returns the entries ``change`` was last given."""
    client = session.client
    for _ in range(CHANGE_ATTEMPTS_MAX):
        try:
            data, stat = session.wait(client.get_async(znodes.ACLS))
            old, version = decode_acls(data), stat.version
        except NoNodeError:
            old, version = [], None
        new = change([dict(entry) for entry in old])
        if new == old:
            return old
        encoded = _encode(new)
        try:
            if version is None:
                session.wait(client.ensure_path_async(znodes.CONFIG))
                session.wait(client.create_async(znodes.ACLS, encoded))
            else:
                session.wait(client.set_async(znodes.ACLS, encoded, version=version))
        except (NodeExistsError, BadVersionError, NoNodeError):
            continue  # another broker came first: read again
        return old
    raise ConditionalWriteLostError(
        f"ZooKeeper znode {znodes.ACLS} changed under {CHANGE_ATTEMPTS_MAX} writes in a row; "
        "is something rewriting it in a loop?"
    )


class AclWatch:
    """Calls ``on_change(entries)`` with the cluster's entries at once (on the caller's
    thread) and after every change of the znode (on kazoo's event thread; a znode deleted
    is no entries), until it answers False. A znode that does not decode is logged and skipped: the grants in force
    stay those last read. ZooKeeper keeps the watch across a reconnection; kazoo reads the
    znode again after a new session."""

    def __init__(self, session: ZooKeeperSession, on_change: Callable[[Entries], bool]) -> None:
        self._on_change = on_change
        DataWatch(session.client, znodes.ACLS, self._on_data)

    def _on_data(self, data: bytes | None, stat: ZnodeStat | None, event: object = None) -> bool:
        # ``event`` taken, so that kazoo never calls again without it after a TypeError
        try:
            entries = [] if data is None else decode_acls(data)
        except CorruptJournalError as error:
            log.error("the cluster's ACLs were not applied: %s", error)
            return True
        try:
            return self._on_change(entries)
        except Exception:  # an entry refused, a bug: the watch goes on
            log.exception("the cluster's changed ACLs were not applied")
        return True
