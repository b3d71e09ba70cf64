"""A standalone ZooKeeper server process on 127.0.0.1, from the jars PySpark ships.

For tests and for trying a cluster out on one machine; production runs a real
ZooKeeper install (docs/zookeeper.md). ``pyspark/jars`` holds ZooKeeper 3.9 with
everything its server needs, and PySpark is already the Spark connector's
dependency, so nothing else is downloaded. PySpark is found, never imported (its
import is slow and starts nothing we need).

    with LocalZooKeeper(scratch_dir) as server:     # picks a free loopback port
        connect = server.connect_string              # "127.0.0.1:PORT"

The config-file form of ``ZooKeeperServerMain`` is used because its short form
(``<port> <dataDir>``) binds every interface; the AdminServer (port 8080 by
default) is off, and only the four-letter words a probe needs are allowed. The
server's output goes to ``zookeeper.log`` in the scratch directory, whose last
lines every start error quotes.

Thread rule: one owner thread. No kazoo here: starting a server needs no client.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from twinlog.engine.base.errors import TwinlogError

SERVER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
LOOPBACK = "127.0.0.1"
TICK_TIME_MS = 2000  # ZooKeeper's default; sessions may last 2..20 ticks
HEAP_MB = 256
START_TIMEOUT_S = 60.0  # 3.5 s measured alone; a JVM on two busy cores can take much longer
STOP_TIMEOUT_S = 10.0  # after SIGTERM, before SIGKILL
PORT_ATTEMPTS_MAX = 5  # a free port can be taken by another process before the JVM binds it
PROBE_INTERVAL_S = 0.1
LOG_LINES_QUOTED = 20
CONFIG_FILE = "zoo.cfg"
LOG_FILE = "zookeeper.log"
LOG4J2_FILE = "log4j2.properties"

# Without a log4j2 configuration the server prints almost nothing: this one logs INFO to
# standard output, which is the log file.
LOG4J2_CONFIG = """\
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
"""


class LocalZooKeeperError(TwinlogError):
    """The local ZooKeeper could not be started: no java, no jars, or no ``imok`` in time.

    Not retriable as such: the message names what is missing (java, the jars, the
    port) and quotes the server's log.
    """


def find_java() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise LocalZooKeeperError(
            "java was not found (JAVA_HOME is unset or has no bin/java, and there is none on "
            "PATH); the local ZooKeeper needs Java 17 or later (Debian: apt-get install "
            "openjdk-17-jre-headless)"
        )
    return found


def find_zookeeper_jars() -> Path:
    """The ``jars`` folder of the installed pyspark package, checked to hold ZooKeeper."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise LocalZooKeeperError(
            "the local ZooKeeper runs from the jars PySpark ships, and pyspark is not "
            "installed: pip install 'twinlog[spark]'"
        )
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not any(jars.glob("zookeeper-[0-9]*.jar")):
        raise LocalZooKeeperError(
            f"{jars} holds no zookeeper-*.jar; this pyspark does not ship ZooKeeper "
            "(pyspark 4.x does: pip install 'twinlog[spark]')"
        )
    return jars


def free_loopback_port() -> int:
    """A port free on 127.0.0.1 now; another process may take it before it is bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def four_letter_word(port: int, word: str, timeout_s: float = 2.0) -> str:
    """Send a four-letter word (``ruok``, ``srvr``, ...) to 127.0.0.1:port; the answer."""
    with socket.create_connection((LOOPBACK, port), timeout=timeout_s) as connection:
        connection.sendall(word.encode())
        chunks = []
        while chunk := connection.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def zoo_cfg(data_dir: Path, port: int, tick_time_ms: int) -> str:
    return (
        f"tickTime={tick_time_ms}\n"
        f"dataDir={data_dir.resolve()}\n"
        f"clientPort={port}\n"
        f"clientPortAddress={LOOPBACK}\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=ruok,srvr,stat,mntr\n"
    )


class LocalZooKeeper:
    """One standalone server; a context manager that starts it and stops it."""

    def __init__(
        self,
        scratch_dir: str | os.PathLike[str],
        tick_time_ms: int = TICK_TIME_MS,
        start_timeout_s: float = START_TIMEOUT_S,
        port: int = 0,
    ) -> None:
        """``port`` 0 picks a free loopback port (tried again if another process takes it
        first); another port is used as given, and a port in use is an error."""
        self.scratch_dir = Path(scratch_dir)
        self.tick_time_ms = tick_time_ms
        self.start_timeout_s = start_timeout_s
        self.log_path = self.scratch_dir / LOG_FILE
        self.requested_port = port
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """``127.0.0.1:PORT``: append ``/chroot`` for a client."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def start(self) -> None:
        """Start the server and wait for ``imok``; LocalZooKeeperError if it does not come."""
        java = find_java()
        jars = find_zookeeper_jars()
        (self.scratch_dir / "data").mkdir(parents=True, exist_ok=True)
        (self.scratch_dir / LOG4J2_FILE).write_text(LOG4J2_CONFIG)
        attempts = PORT_ATTEMPTS_MAX if self.requested_port == 0 else 1
        for attempt in range(1, attempts + 1):
            self.port = self.requested_port or free_loopback_port()
            self._spawn(java, jars)
            if self._wait_until_ok(java, jars, last_attempt=attempt == attempts):
                return

    def exited(self) -> int | None:
        """The server's exit status if it has stopped on its own, else None."""
        return None if self.process is None else self.process.poll()

    def _spawn(self, java: str, jars: Path) -> None:
        config = self.scratch_dir / CONFIG_FILE
        config.write_text(zoo_cfg(self.scratch_dir / "data", self.port, self.tick_time_ms))
        command = [
            java,
            f"-Xmx{HEAP_MB}m",
            f"-Dlog4j2.configurationFile={(self.scratch_dir / LOG4J2_FILE).resolve()}",
            "-cp",
            f"{jars}/*",
            SERVER_MAIN,
            str(config.resolve()),
        ]
        with self.log_path.open("ab") as log:
            log.write(f"--- starting on port {self.port}: {' '.join(command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    def _wait_until_ok(self, java: str, jars: Path, last_attempt: bool) -> bool:
        """True once serving; False if the port was taken under us (and not the last try).

        ``imok`` only says the process runs: until its database is loaded ``srvr`` answers
        "not currently serving requests" and clients are turned away, so both are asked."""
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if "Address already in use" in self._log_tail() and not last_attempt:
                    return False
                raise self._start_error(java, jars, f"it exited with {self.process.returncode}")
            try:
                if four_letter_word(self.port, "ruok") == "imok" and "Mode:" in four_letter_word(
                    self.port, "srvr"
                ):
                    return True
            except OSError:
                pass  # not listening yet
            time.sleep(PROBE_INTERVAL_S)
        self.stop()
        raise self._start_error(
            java, jars, f"not serving (imok and a mode) within {self.start_timeout_s:.0f} s"
        )

    def _start_error(self, java: str, jars: Path, what: str) -> LocalZooKeeperError:
        return LocalZooKeeperError(
            f"the local ZooKeeper did not start on {self.connect_string}: {what} (java {java}, "
            f"jars {jars}). Last lines of {self.log_path}:\n{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        if not self.log_path.exists():
            return "(no log)"
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-LOG_LINES_QUOTED:])

    def pause(self) -> None:
        """SIGSTOP: the server answers nothing and expires nothing until ``resume()``."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, as a crash: the data directory stays, for ``restart``. Idempotent."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)

    def restart(self) -> None:
        """Start again after ``stop`` or ``kill``, on the same port and from the same data
        directory: clients' connect strings stay valid, and sessions the server had
        written to its transaction log may resume."""
        assert self.port, "restart() needs a server that was started once"
        requested, self.requested_port = self.requested_port, self.port
        try:
            self.start()
        finally:
            self.requested_port = requested

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within STOP_TIMEOUT_S. Idempotent."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGCONT)  # a paused JVM cannot act on SIGTERM
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> LocalZooKeeper:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
