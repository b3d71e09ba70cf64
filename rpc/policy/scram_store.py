"""Where SCRAM credentials are kept: ``ScramStore``; on a single node ``FileScramStore``,
the file ``DATA_DIR/scram-credentials``; on a cluster ``ZooKeeperScramStore``, the znodes
``config/users/<user>`` below the cluster's chroot.

    {"version": 1, "users": {"alice": {"SCRAM-SHA-256": {"salt": B64, "iterations": 8192,
                                                          "stored_key": B64, "server_key": B64}}}}

Salted and hashed only (``twinlog.rpc.policy.scram``): never a password. The file is
replaced atomically (``replace_file``, with a CRC-32C line), mode 600, and read again
whenever it changed, so both doors of a server (the Kafka listener and the gRPC admin
service) and every ``FileScramStore`` of the same path see each other's changes at once.

On a cluster the credentials are where Kafka keeps them in ZooKeeper, one znode per user
(``twinlog.engine.zookeeper.user_configs``: the name escaped as Kafka escapes it, the
cluster's ACL), one config key per mechanism, in Kafka's words:

    config/users/alice   {"config":{"SCRAM-SHA-256":"salt=B64,stored_key=B64,server_key=B64,
                          iterations=8192"},"version":1}

so a credential set through any broker is every broker's at once: a login reads the
user's znode (no cache to go stale), ``mechanisms`` lists them all. A ZooKeeper that does
not answer is ZooKeeperUnavailableError (retriable), never a refused password.

``scram_store_of(broker)`` picks the store: a cluster member's (its metadata is kept in
ZooKeeper), else the one of the broker's data directory, one per path.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import CorruptJournalError, InvalidConfigError
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.engine.zookeeper.user_configs import (
    UserConfig,
    change_user_config,
    read_user_config,
    read_user_configs,
    user_config_path,
)
from twinlog.rpc.policy.scram import MECHANISMS, ScramCredential
from twinlog.rpc.policy.store_place import OnePerPath, store_place

FILE_NAME = "scram-credentials"
FORMAT_VERSION = 1
FILE_MODE = 0o600


class ScramStore(Protocol):
    def credential(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def mechanisms(self) -> dict[str, list[tuple[str, int]]]:
        """Every user's (mechanism, iterations), by user: nothing secret."""
        ...

    def set(self, user: str, credential: ScramCredential) -> None: ...

    def delete(self, user: str, mechanism: str) -> bool:
        """False: the user had no credential for that mechanism."""
        ...


@dataclass(frozen=True)
class _Seen:
    inode: int
    size: int
    mtime_ns: int


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class FileScramStore:
    """Thread rule: any thread; writes hold the store's lock (one store per path in a
    process: ``scram_store_of``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: _Seen | None = None
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            return self._current().get(user, {}).get(mechanism)

    def mechanisms(self) -> dict[str, list[tuple[str, int]]]:
        with self._lock:
            return {
                user: [(m, c.iterations) for m, c in sorted(by_mechanism.items())]
                for user, by_mechanism in sorted(self._current().items())
            }

    def set(self, user: str, credential: ScramCredential) -> None:
        if not user:
            raise ValueError("a SCRAM user needs a name")
        with self._lock:
            users = {name: dict(held) for name, held in self._current().items()}
            users.setdefault(user, {})[credential.mechanism] = credential
            self._write(users)

    def delete(self, user: str, mechanism: str) -> bool:
        with self._lock:
            users = {name: dict(held) for name, held in self._current().items()}
            held = users.get(user, {})
            if mechanism not in held:
                return False
            del held[mechanism]
            if not held:
                del users[user]
            self._write(users)
            return True

    def _stat(self) -> _Seen | None:
        try:
            status = self.path.stat()
        except FileNotFoundError:
            return None
        return _Seen(status.st_ino, status.st_size, status.st_mtime_ns)

    def _current(self) -> dict[str, dict[str, ScramCredential]]:
        seen = self._stat()
        if seen != self._seen:
            self._users = {} if seen is None else self._read()
            self._seen = seen
        return self._users

    def _read(self) -> dict[str, dict[str, ScramCredential]]:
        try:
            document = json.loads(read_checked(self.path))
            if document.get("version") != FORMAT_VERSION:
                raise ValueError(f"format version {document.get('version')!r}")
            users: dict[str, dict[str, ScramCredential]] = {}
            for user, by_mechanism in document["users"].items():
                users[user] = {
                    mechanism: ScramCredential(
                        mechanism,
                        base64.b64decode(entry["salt"], validate=True),
                        int(entry["iterations"]),
                        base64.b64decode(entry["stored_key"], validate=True),
                        base64.b64decode(entry["server_key"], validate=True),
                    )
                    for mechanism, entry in by_mechanism.items()
                    if mechanism in MECHANISMS
                }
        except (OSError, ValueError, KeyError, TypeError, AttributeError, binascii.Error) as error:
            raise CorruptJournalError(
                f"the SCRAM credentials file {self.path} cannot be read ({error}): restore it "
                "from a backup, or move it away and set the credentials again with "
                "'twinlog users set-scram'"
            ) from None
        return users

    def _write(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        document: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "users": {
                user: {
                    mechanism: {
                        "salt": _b64(c.salt),
                        "iterations": c.iterations,
                        "stored_key": _b64(c.stored_key),
                        "server_key": _b64(c.server_key),
                    }
                    for mechanism, c in sorted(held.items())
                }
                for user, held in sorted(users.items())
            },
        }
        contents = json.dumps(document, indent=1, sort_keys=True).encode()
        replace_file(self.path, with_checksum(contents), mode=FILE_MODE)
        self._users = users
        self._seen = self._stat()


# Kafka's ScramCredentialUtils: the keys of a credential's value, in its order.
ZOOKEEPER_FIELDS = ("salt", "stored_key", "server_key", "iterations")


def credential_to_text(credential: ScramCredential) -> str:
    """Kafka's form of a credential in ZooKeeper (salt and keys in base64)."""
    return (
        f"salt={_b64(credential.salt)},stored_key={_b64(credential.stored_key)},"
        f"server_key={_b64(credential.server_key)},iterations={credential.iterations}"
    )


def credential_of_text(mechanism: str, text: str, where: str) -> ScramCredential:
    """The credential of Kafka's form; CorruptJournalError naming ``where`` (never the
    value) when it is not one."""
    try:
        fields = dict(part.split("=", 1) for part in text.split(","))
        if sorted(fields) != sorted(ZOOKEEPER_FIELDS):
            raise ValueError(f"fields {', '.join(sorted(fields))}")
        return ScramCredential(
            mechanism,
            base64.b64decode(fields["salt"], validate=True),
            int(fields["iterations"]),
            base64.b64decode(fields["stored_key"], validate=True),
            base64.b64decode(fields["server_key"], validate=True),
        )
    except (ValueError, binascii.Error) as error:
        detail = str(error) if str(error).startswith("fields") else type(error).__name__
        raise CorruptJournalError(
            f"the {mechanism} credential in {where} is not "
            f"'salt=...,stored_key=...,server_key=...,iterations=N' ({detail}): set it again "
            "with 'twinlog users set-scram'"
        ) from None


class ZooKeeperScramStore:
    """The credentials of a cluster, in ZooKeeper (module docstring). Thread rule: any
    thread; changes are conditional writes, so brokers that change one user at once
    each see their change applied or read again."""

    def __init__(self, session: ZooKeeperSession) -> None:
        self.session = session

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        text = read_user_config(self.session, user).get(mechanism)
        if text is None or mechanism not in MECHANISMS:
            return None
        return credential_of_text(mechanism, text, self._where(user))

    def mechanisms(self) -> dict[str, list[tuple[str, int]]]:
        found: dict[str, list[tuple[str, int]]] = {}
        for user, config in sorted(read_user_configs(self.session).items()):
            held = [
                (m, credential_of_text(m, config[m], self._where(user)).iterations)
                for m in sorted(config)
                if m in MECHANISMS
            ]
            if held:
                found[user] = held
        return found

    def set(self, user: str, credential: ScramCredential) -> None:
        if not user:
            raise ValueError("a SCRAM user needs a name")
        text = credential_to_text(credential)
        change_user_config(self.session, user, lambda old: {**old, credential.mechanism: text})

    def delete(self, user: str, mechanism: str) -> bool:
        def without(old: UserConfig) -> UserConfig:
            return {key: value for key, value in old.items() if key != mechanism}

        try:
            return mechanism in change_user_config(self.session, user, without)
        except InvalidConfigError:  # a name no user can have: it has no credential
            return False

    def _where(self, user: str) -> str:
        return f"ZooKeeper znode {user_config_path(user)} ({self.session.connect})"


_stores = OnePerPath(FILE_NAME, FileScramStore)


def file_scram_store(data_dir: str | os.PathLike[str]) -> FileScramStore:
    """The one store of ``data_dir`` in this process."""
    return _stores.of(data_dir)


def scram_store_of(broker: object) -> ScramStore | None:
    """A cluster member's store in ZooKeeper (its metadata store is ZooKeeper's), else the
    store of the broker's data directory; None for a broker with neither (a test double, a
    remote broker): SCRAM is then not offered."""
    place = store_place(broker)
    if isinstance(place, ZooKeeperSession):
        return ZooKeeperScramStore(place)
    return None if place is None else file_scram_store(place)
