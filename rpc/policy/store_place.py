"""Where a broker keeps what its administrators set at run time (SCRAM credentials,
ACL grants): a cluster member in ZooKeeper (its metadata store is ZooKeeper's), a single
node in its data directory, a broker with neither (a test double, a remote broker)
nowhere."""

from __future__ import annotations

from pathlib import Path

from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.session import ZooKeeperSession


def store_place(broker: object) -> ZooKeeperSession | Path | None:
    metadata = getattr(broker, "metadata", None)
    if isinstance(metadata, ZooKeeperMetadataStore):
        return metadata.session
    data_dir = getattr(broker, "data_dir", None)
    return None if data_dir is None else Path(data_dir)
