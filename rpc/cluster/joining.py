"""Joining ZooKeeper: the session, and a broker opener on the cluster's metadata and ids.

    session, opener = join_zookeeper(data_dir, broker_config, "127.0.0.1:2181/twinlog",
                                     broker_id=1, session_timeout_ms=6000,
                                     zookeeper_auth_file=None)
    broker = opener(data_dir, **broker_config)

What ``twinlog serve --zookeeper`` does before it opens the broker; the member
(``cluster_member``) joins once the broker is open and its server listens.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial
from typing import Any

from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.zookeeper.credentials import load_zookeeper_credential
from twinlog.engine.zookeeper.id_source import ZooKeeperIdSource
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.session import ZooKeeperSession

log = logging.getLogger("twinlog.cluster")


def join_zookeeper(
    data_dir: str | os.PathLike[str],
    broker_config: dict[str, Any],
    zookeeper: str,
    broker_id: int,
    session_timeout_ms: int,
    zookeeper_auth_file: str | None,
) -> tuple[ZooKeeperSession, Callable[..., Any]]:
    """The ZooKeeper session and a broker opener on the cluster's metadata and ids."""
    journal_partitions = BrokerConfig.from_mapping(broker_config).journal_partitions
    log.info("joining the cluster at %s as broker %d", zookeeper, broker_id)
    credential = None
    if zookeeper_auth_file is not None:
        credential = load_zookeeper_credential(zookeeper_auth_file)
    session = ZooKeeperSession(
        zookeeper, session_timeout_ms=session_timeout_ms, credential=credential
    )
    try:
        metadata = ZooKeeperMetadataStore(session, data_dir, journal_partitions)
        ids = ZooKeeperIdSource(session)
    except BaseException:
        session.close()
        raise
    # Each coordinator this broker loads takes fresh id blocks: its ids then stay above
    # every id its journal partition's earlier leaders handed out (CLUSTER.md §3.7).
    opener = partial(
        Broker.open,
        metadata=metadata,
        ids=ids,
        broker_id=broker_id,
        coordinator_ids=lambda: ZooKeeperIdSource(session),
    )
    return session, opener


__all__ = ["join_zookeeper"]
