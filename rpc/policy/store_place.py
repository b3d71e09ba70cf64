"""Where a broker keeps what its administrators set at run time (SCRAM credentials,
ACL grants): a cluster member in ZooKeeper (its metadata store is ZooKeeper's), a single
node in its data directory, a broker with neither (a test double, a remote broker)
nowhere."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.session import ZooKeeperSession


def store_place(broker: object) -> ZooKeeperSession | Path | None:
    metadata = getattr(broker, "metadata", None)
    if isinstance(metadata, ZooKeeperMetadataStore):
        return metadata.session
    data_dir = getattr(broker, "data_dir", None)
    return None if data_dir is None else Path(data_dir)


T = TypeVar("T")


class OnePerPath(Generic[T]):
    """One store per file in a process, so that both doors of a server (and every caller
    in the process) share it. Thread rule: any thread."""

    def __init__(self, file_name: str, make: Callable[[Path], T]) -> None:
        self._file_name = file_name
        self._make = make
        self._made: dict[Path, T] = {}
        self._lock = threading.Lock()

    def of(self, data_dir: str | os.PathLike[str]) -> T:
        """The store of ``data_dir``'s file."""
        path = Path(data_dir).resolve() / self._file_name
        with self._lock:
            if path not in self._made:
                self._made[path] = self._make(path)
            return self._made[path]
