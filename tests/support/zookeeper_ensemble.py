"""A three-server ZooKeeper ensemble on 127.0.0.1, from PySpark's jars (CLUSTER.md §1, F21).

    with ZooKeeperEnsemble(scratch_dir) as ensemble:
        ensemble.hosts                    # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
        ensemble.kill(ensemble.leader())  # SIGKILL the ZAB leader; the others elect one

The ZooKeeper guide's "Running Replicated ZooKeeper" with distinct ports per server:
each server has its ``myid`` in its data directory, every listener bound to 127.0.0.1
(``quorumListenOnAllIPs=false``), the AdminServer off, and a short tick (sessions of
1..10 s). ``start`` waits until one server says ``Mode: leader`` and the others
``Mode: follower`` (about ten seconds for three JVMs on two cores).

No tests here. Thread rule: one owner thread.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import TracebackType

from twinlog.rpc.cli.local_zookeeper import (
    HEAP_MB,
    LOG4J2_CONFIG,
    LOG4J2_FILE,
    LOOPBACK,
    find_java,
    find_zookeeper_jars,
    four_letter_word,
    free_loopback_port,
)

QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
SERVERS = 3
TICK_TIME_MS = 500
QUORUM_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.2


class ZooKeeperEnsemble:
    def __init__(self, scratch_dir: Path, tick_time_ms: int = TICK_TIME_MS) -> None:
        self.scratch_dir = scratch_dir
        self.tick_time_ms = tick_time_ms
        # (client, quorum, election) port of each server, by its id 1..3
        self.ports = {
            server_id: (free_loopback_port(), free_loopback_port(), free_loopback_port())
            for server_id in range(1, SERVERS + 1)
        }
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def hosts(self) -> str:
        return ",".join(f"{LOOPBACK}:{ports[0]}" for ports in self.ports.values())

    def _config(self, server_id: int) -> Path:
        directory = self.scratch_dir / f"zk{server_id}"
        (directory / "data").mkdir(parents=True, exist_ok=True)
        (directory / "data" / "myid").write_text(f"{server_id}\n")
        (directory / LOG4J2_FILE).write_text(LOG4J2_CONFIG)
        servers = "".join(
            f"server.{other}={LOOPBACK}:{quorum}:{election}\n"
            for other, (_client, quorum, election) in self.ports.items()
        )
        config = directory / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            "initLimit=10\n"
            "syncLimit=5\n"
            f"dataDir={(directory / 'data').resolve()}\n"
            f"clientPort={self.ports[server_id][0]}\n"
            f"clientPortAddress={LOOPBACK}\n"
            "quorumListenOnAllIPs=false\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr\n" + servers
        )
        return config

    def start(self) -> None:
        """Start every server and wait for the quorum; on any failure stop them all."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        java, jars = find_java(), find_zookeeper_jars()
        for server_id in self.ports:
            config = self._config(server_id)
            command = [
                java,
                f"-Xmx{HEAP_MB}m",
                f"-Dlog4j2.configurationFile={(config.parent / LOG4J2_FILE).resolve()}",
                "-cp",
                f"{jars}/*",
                QUORUM_MAIN,
                str(config.resolve()),
            ]
            with (config.parent / "zookeeper.log").open("ab") as log:
                self.processes[server_id] = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
                )
        deadline = time.monotonic() + QUORUM_TIMEOUT_S
        while time.monotonic() < deadline:
            modes = [str(self.mode(server_id)) for server_id in self.ports]
            if sorted(modes) == ["follower", "follower", "leader"]:
                return
            time.sleep(POLL_S)
        raise AssertionError(f"no quorum within {QUORUM_TIMEOUT_S:.0f} s: modes {modes}")

    def mode(self, server_id: int) -> str | None:
        """``leader``, ``follower``, or None (down, or not in a quorum)."""
        try:
            answer = four_letter_word(self.ports[server_id][0], "srvr", timeout_s=1.0)
        except OSError:
            return None
        for line in answer.splitlines():
            if line.startswith("Mode: "):
                return line.removeprefix("Mode: ").strip()
        return None

    def leader(self) -> int | None:
        for server_id, process in self.processes.items():
            if process.poll() is None and self.mode(server_id) == "leader":
                return server_id
        return None

    def kill(self, server_id: int) -> None:
        process = self.processes[server_id]
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> ZooKeeperEnsemble:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
