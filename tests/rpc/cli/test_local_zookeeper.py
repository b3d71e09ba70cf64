"""The bundled ZooKeeper starts, answers ``ruok``, listens on loopback only, and says
clearly what is missing when it cannot start."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_sockets import listening_addresses

from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.cli import local_zookeeper as local_server
from twinlog.rpc.cli.local_zookeeper import (
    LocalZooKeeper,
    LocalZooKeeperError,
    four_letter_word,
)

pytestmark = pytest.mark.jvm  # every test starts or stops a ZooKeeper server


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the ZooKeeper tests need Java 17")
    with LocalZooKeeper(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


def is_loopback(hex_address: str) -> bool:
    # IPv4 127.x.x.x is stored little-endian ("0100007F"); IPv6 ::1 and ::ffff:127.x.x.x
    # (a JVM binds 127.0.0.1 through an IPv6 socket) end in those words.
    if len(hex_address) == 8:
        return hex_address.endswith("7F")
    return hex_address == "00000000000000000000000001000000" or (
        hex_address.startswith("0000000000000000FFFF0000") and hex_address.endswith("7F")
    )


def test_it_answers_ruok_and_listens_on_loopback_only(zookeeper: LocalZooKeeper) -> None:
    assert four_letter_word(zookeeper.port, "ruok") == "imok"
    assert "Mode: standalone" in four_letter_word(zookeeper.port, "srvr")
    listening = listening_addresses(zookeeper.pid)
    assert zookeeper.port in {port for _address, port in listening}
    assert len(listening) == 1, f"only the client port, no AdminServer: {listening}"
    assert all(is_loopback(address) for address, _port in listening), listening


def test_loopback_check_tells_the_addresses_apart() -> None:
    assert is_loopback("0100007F")
    assert not is_loopback("00000000")  # 0.0.0.0
    assert is_loopback("0000000000000000FFFF00000100007F")
    assert not is_loopback("00000000000000000000000000000000")  # ::


def test_without_java_the_error_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LocalZooKeeperError, match=r"java was not found.*Java 17"):
        LocalZooKeeper(tmp_path).start()
    assert not (tmp_path / "zookeeper.log").exists()


def test_without_pyspark_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "pyspark" else object()
    )
    with pytest.raises(LocalZooKeeperError, match=r"pyspark is not installed.*twinlog\[spark\]"):
        local_server.find_zookeeper_jars()


def test_a_server_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    # A tick of 0 is refused by ZooKeeper's config parser: the JVM exits at once.
    server = LocalZooKeeper(tmp_path, tick_time_ms=0, start_timeout_s=30)
    if local_server.shutil.which("java") is None:
        pytest.skip("no java")
    with pytest.raises(LocalZooKeeperError) as refused:
        server.start()
    message = str(refused.value)
    assert "exited with" in message and str(tmp_path / "zookeeper.log") in message
    assert "java " in message and "jars " in message and "127.0.0.1:" in message
    assert server.process is None or server.process.poll() is not None


def test_a_killed_server_restarts_on_its_port_with_its_znodes(tmp_path: Path) -> None:
    with LocalZooKeeper(tmp_path, tick_time_ms=500) as server:
        port = server.port
        with ZooKeeperSession(server.connect_string + "/restart") as session:
            session.client.create("/kept", b"value")
        server.kill()
        with pytest.raises(OSError):
            four_letter_word(port, "ruok", timeout_s=0.5)
        server.restart()
        assert server.port == port
        with ZooKeeperSession(server.connect_string + "/restart") as session:
            assert session.client.get("/kept")[0] == b"value"
