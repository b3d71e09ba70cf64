"""A user's settings in ZooKeeper, where Kafka keeps them: ``config/users/<user>``.

    config/users/alice   {"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,
                          iterations=8192"},"version":1}

Kafka's layout (AdminZkClient's entity znode of ConfigType "users"): a JSON object with
``version`` 1 and ``config``, a map of string keys to string values. twinlog keeps the
SCRAM credentials of the Kafka listener there (``twinlog.rpc.policy.scram_store`` gives
the keys and values their meaning); a key it does not know (one of Kafka's quotas, put
there by hand) is kept as found when another key changes.

The znode's name is the user name escaped as Kafka's ``Sanitizer.sanitize`` escapes it:
its UTF-8 bytes, each but ASCII letters, digits and ``.-_`` written ``%XX`` (upper case),
so ``/`` is ``%2F`` and never makes a path, a space ``%20``, ``*`` ``%2A``. The names
``.`` and ``..`` (not znode names to ZooKeeper) and the empty name are refused
(InvalidConfigError); no user by those names can be read.

A change is read-modify-write, conditional on the zkVersion read (a create when there is
no znode), and read again after a lost race; a znode left without keys is deleted, as
conditionally. Unlike Kafka, no change notification is written under ``config/changes``:
every reader reads the znode when it needs it. Every znode is created with the session's
ACL (the cluster's credential, when it has one), as the other znodes.

Thread rule: any thread. Every call waits at most the session's request timeout
(ZooKeeperUnavailableError, retriable).
"""

from __future__ import annotations

import string
import urllib.parse
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from twinlog.engine.base.errors import (
    ConditionalWriteLostError,
    CorruptJournalError,
    InvalidConfigError,
)
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession

FORMAT_VERSION = 1
KEYS = ("version", "config")
UNESCAPED = frozenset((string.ascii_letters + string.digits + ".-_").encode())
CHANGE_ATTEMPTS_MAX = 100

UserConfig = dict[str, str]


def user_znode_name(user: str) -> str:
    """``user`` as a znode name (Kafka's Sanitizer); InvalidConfigError for a name that
    cannot be one."""
    if user in ("", ".", ".."):
        shown = repr(user) if user else "an empty name"
        raise InvalidConfigError(
            f"a user cannot be named {shown}: ZooKeeper refuses it as a znode name; pick "
            "another name"
        )
    return "".join(
        chr(byte) if byte in UNESCAPED else f"%{byte:02X}" for byte in user.encode("utf-8")
    )


def user_of_znode_name(name: str) -> str:
    """The user a znode of ``config/users`` names (Kafka's ``Sanitizer.desanitize``)."""
    return urllib.parse.unquote_plus(name, encoding="utf-8", errors="strict")


def user_config_path(user: str) -> str:
    return f"{znodes.USER_CONFIGS}/{user_znode_name(user)}"


def _decode(path: str, data: bytes) -> UserConfig:
    value = znodes.decode(path, data, KEYS)
    config = value["config"]
    if (
        value["version"] != FORMAT_VERSION
        or not isinstance(config, dict)
        or not all(isinstance(key, str) and isinstance(item, str) for key, item in config.items())
    ):
        # Shown without the values: they may be credentials.
        raise CorruptJournalError(
            f"ZooKeeper znode {path} does not hold what twinlog wrote there (version "
            f"{value['version']!r}, expected {FORMAT_VERSION}, and a map of strings as "
            "config). Was it changed by hand? Restore it, or delete it and set the user's "
            "settings again"
        )
    return dict(config)


def _encode(config: UserConfig) -> bytes:
    return znodes.encode({"version": FORMAT_VERSION, "config": config})


def read_user_config(session: ZooKeeperSession, user: str) -> UserConfig:
    """``user``'s settings; empty when it has none (or a name no znode can have)."""
    try:
        path = user_config_path(user)
    except InvalidConfigError:
        return {}
    try:
        data, _ = session.wait(session.client.get_async(path))
    except NoNodeError:
        return {}
    return _decode(path, data)


def read_user_configs(session: ZooKeeperSession) -> dict[str, UserConfig]:
    """Every user's settings, by user name (users without a key left out)."""
    client = session.client
    try:
        names = session.wait(client.get_children_async(znodes.USER_CONFIGS))
    except NoNodeError:
        return {}
    # One round trip for all of them: the requests are pipelined on the connection.
    pending = {name: client.get_async(f"{znodes.USER_CONFIGS}/{name}") for name in sorted(names)}
    found: dict[str, UserConfig] = {}
    for name, request in pending.items():
        path = f"{znodes.USER_CONFIGS}/{name}"
        try:
            data, _ = session.wait(request)
        except NoNodeError:
            continue  # deleted since the listing
        config = _decode(path, data)
        if config:
            try:
                found[user_of_znode_name(name)] = config
            except UnicodeDecodeError:
                raise CorruptJournalError(
                    f"ZooKeeper znode {path}: its name is not a user name escaped as Kafka "
                    "escapes it (not UTF-8 once unescaped); was it made by hand?"
                ) from None
    return found


def change_user_config(
    session: ZooKeeperSession, user: str, change: Callable[[UserConfig], UserConfig]
) -> UserConfig:
    """Write ``change(settings)`` over ``user``'s settings, conditional on what was read
    (``change`` may be called again after a lost race, so it must be pure); nothing is
    written when it changes nothing. Returns the settings ``change`` was last given.

    InvalidConfigError for a name no znode can have; ConditionalWriteLostError after
    ``CHANGE_ATTEMPTS_MAX`` lost races in a row."""
    path = user_config_path(user)
    client = session.client
    for _ in range(CHANGE_ATTEMPTS_MAX):
        try:
            data, stat = session.wait(client.get_async(path))
            old, version = _decode(path, data), stat.version
        except NoNodeError:
            old, version = {}, None
        new = change(dict(old))
        if new == old:
            return old
        try:
            if version is None:
                session.wait(client.ensure_path_async(znodes.USER_CONFIGS))
                session.wait(client.create_async(path, _encode(new)))
            elif new:
                session.wait(client.set_async(path, _encode(new), version=version))
            else:
                _delete_or_empty(session, path, version)
        except (NodeExistsError, BadVersionError, NoNodeError):
            continue  # another writer came first: read again
        return old
    raise ConditionalWriteLostError(
        f"ZooKeeper znode {path} changed under {CHANGE_ATTEMPTS_MAX} writes in a row; is "
        "something rewriting it in a loop?"
    )


def _delete_or_empty(session: ZooKeeperSession, path: str, version: int) -> None:
    """Delete the znode; one with children (Kafka's per-client quotas of the user) is
    emptied instead."""
    try:
        session.wait(session.client.delete_async(path, version=version))
    except NotEmptyError:
        session.wait(session.client.set_async(path, _encode({}), version=version))
