"""Tests of ``twinlog.engine.zookeeper`` against a real ZooKeeper.

One standalone server (PySpark's jars, 127.0.0.1, a free port) serves the whole
session; each test has a chroot of its own (``zk_connect``), so the tests share
no znodes. A short tick lets sessions time out within a second or two. Skipped
only where there is no java (CI has Java 17).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

TICK_TIME_MS = 500  # sessions of 1..10 s
SESSION_TIMEOUT_MS = 4000


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the ZooKeeper tests need Java 17")
    scratch: Path = tmp_path_factory.mktemp("zookeeper")
    with LocalZooKeeper(scratch, tick_time_ms=TICK_TIME_MS) as server:
        yield server


@pytest.fixture()
def zk_connect(zookeeper: LocalZooKeeper) -> str:
    """``127.0.0.1:PORT/twinlog/<random>``: a chroot no other test uses."""
    return f"{zookeeper.connect_string}/twinlog/{uuid.uuid4().hex[:12]}"


@pytest.fixture()
def session(zk_connect: str) -> Iterator[ZooKeeperSession]:
    with ZooKeeperSession(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS) as opened:
        yield opened
