"""Where SCRAM credentials are kept: ``ScramStore``, and on a single node ``FileScramStore``,
the file ``DATA_DIR/scram-credentials``.

    {"version": 1, "users": {"alice": {"SCRAM-SHA-256": {"salt": B64, "iterations": 8192,
                                                          "stored_key": B64, "server_key": B64}}}}

Salted and hashed only (``twinlog.rpc.policy.scram``): never a password. The file is
replaced atomically (``replace_file``, with a CRC-32C line), mode 600, and read again
whenever it changed, so both doors of a server (the Kafka listener and the gRPC admin
service) and every ``FileScramStore`` of the same path see each other's changes at once.
``scram_store_of(broker)`` is the store of a broker's data directory, one per path.

A cluster's brokers each keep their own file: a credential set through one broker is
known to that broker only (Kafka keeps them in ZooKeeper, ``/config/users/<user>``; not
yet done here).
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
from twinlog.engine.base.errors import CorruptJournalError
from twinlog.rpc.policy.scram import MECHANISMS, ScramCredential

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
        replace_file(self.path, with_checksum(contents))
        os.chmod(self.path, FILE_MODE)
        self._users = users
        self._seen = self._stat()


_stores: dict[Path, FileScramStore] = {}
_stores_lock = threading.Lock()


def file_scram_store(data_dir: str | os.PathLike[str]) -> FileScramStore:
    """The one store of ``data_dir`` in this process."""
    path = Path(data_dir).resolve() / FILE_NAME
    with _stores_lock:
        store = _stores.get(path)
        if store is None:
            store = _stores[path] = FileScramStore(path)
        return store


def scram_store_of(broker: object) -> FileScramStore | None:
    """The store of the broker's data directory; None for a broker without one (a test
    double, a remote broker): SCRAM is then not offered."""
    data_dir = getattr(broker, "data_dir", None)
    if data_dir is None:
        return None
    return file_scram_store(data_dir)
