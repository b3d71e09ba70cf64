"""The demo's last act: read the topic with the Spark connector, started early.

Starting Spark (a JVM, then Python workers) takes longer than the rest of the
demo, so ``SparkStarter`` starts the session on a background thread as the demo
begins: the JVM comes up while acts 1-6 run. Once the topic exists it also reads
it once, in the background, and throws the rows away: that first read starts
Spark's Python workers (the data source's planning and reading processes), which
takes seconds; act 7's read is a new, complete one that finds them running. Spark's own output (JVM warnings, log4j lines) goes to a log file instead
of interleaving with the demo's; the file is kept, and named, only when Spark fails.

Without pyspark or Java the act says so in one line and the demo still succeeds.

Thread rule: ``SparkStarter`` is started and awaited by the demo's thread; its
session is used by that thread only once ``session()`` returned it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from twinlog.rpc.cli.common import print_table

SPARK_START_TIMEOUT_S = 120.0  # a hang, not a slow machine


def say(text: str = "") -> None:
    print(text, flush=True)


def java_found() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home:
        return (Path(home) / "bin" / "java").exists()
    return shutil.which("java") is not None


def unavailable_reason() -> str | None:
    """Why Spark cannot run here (one line), or None."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install -e '.[spark]')"
    if not java_found():
        return "Java is not installed (Spark needs Java 17; set JAVA_HOME or put java on PATH)"
    return None


class SparkStarter:
    """A SparkSession (with the twinlog source registered) being made on a background thread."""

    def __init__(self) -> None:
        self.work_dir = Path(tempfile.mkdtemp(prefix="twinlog-demo-spark-"))
        self.log_path = self.work_dir / "spark.log"
        self.started_s = time.monotonic()
        self.ready_s: float | None = None  # monotonic; when the session was ready
        self._session: Any = None
        self._warm_up_target: tuple[str, str] | None = None  # (address, topic)
        self._warm_up_wanted = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="demo-spark-start", daemon=True)

    def start(self) -> SparkStarter:
        self._thread.start()
        return self

    def _start(self) -> None:
        try:
            session = start_session(self.work_dir, self.log_path)
        except BaseException as error:  # reported by session(), on the demo's thread
            self._failure = error
            return
        if self._warm_up_wanted.wait(SPARK_START_TIMEOUT_S) and self._warm_up_target:
            address, topic = self._warm_up_target
            # A failure here is not Spark failing to start: act 7's read repeats it, loudly.
            with contextlib.suppress(Exception):
                read_topic(session, address, topic)
        self._session = session
        self.ready_s = time.monotonic()

    def warm_up(self, address: str, topic: str) -> None:
        """The topic exists now: read it once in the background (rows thrown away)."""
        self._warm_up_target = (address, topic)
        self._warm_up_wanted.set()

    def session(self) -> Any:
        """The session once started; raises what the start raised."""
        self._warm_up_wanted.set()  # without a target, if warm_up was never called
        self._thread.join(SPARK_START_TIMEOUT_S)
        if self._thread.is_alive():
            raise TimeoutError(f"Spark did not start within {SPARK_START_TIMEOUT_S:.0f} s")
        if self._failure is not None:
            raise self._failure
        return self._session

    def stop(self, keep_log: bool) -> None:
        self._thread.join(SPARK_START_TIMEOUT_S)
        if self._session is not None:
            self._session.stop()
        if not keep_log:
            shutil.rmtree(self.work_dir, ignore_errors=True)


def start_session(work_dir: Path, log_path: Path) -> Any:
    # Spark's Python workers must run this interpreter (it has twinlog installed), and
    # a machine whose hostname does not resolve still works on loopback.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from twinlog.connectors.spark import register

    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName("twinlog demo")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.shuffle.partitions", "1")  # 9 rows: one task, not 200
        .set("spark.local.dir", str(work_dir))
        # Quick JIT only and the simplest GC: the JVM starts on less CPU, and a demo's
        # Spark lives seconds, not hours.
        .set("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    )
    with log_path.open("ab") as log:  # the JVM (and its workers) write here, not to the terminal
        gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    context = SparkContext(conf=conf, gateway=gateway)
    context.setLogLevel("ERROR")
    session = SparkSession(context)
    register(session)
    return session


def read_topic(session: Any, address: str, topic: str) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every record of ``topic``, read by the Spark connector."""
    from pyspark.sql import functions

    frame = (
        session.read.format("twinlog")
        .option("servers", address)
        .option("subscribe", topic)
        .load()
        .select("partition", "offset", functions.col("value").cast("string").alias("value"))
    )
    return sorted((row.partition, row.offset, row.value) for row in frame.collect())


def last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def act_spark(
    address: str,
    topic: str,
    expected: list[tuple[int, str]],
    starter: SparkStarter | None,
    skipped_because: str | None,
    indent: str,
) -> int:
    """Read ``topic`` through the Spark connector; 0 when it read exactly ``expected``."""
    if starter is None:
        say(f"{indent}skipped: {skipped_because}")
        return 0
    ok = False
    try:
        try:
            session = starter.session()
        except Exception as error:
            detail = last_line(starter.log_path)
            say(
                f"{indent}skipped: Spark did not start ({type(error).__name__}: {error}"
                + (f"; last log line: {detail}" if detail else "")
                + f"); its log: {starter.log_path}"
            )
            return 0
        read_started_s = time.monotonic()
        assert starter.ready_s is not None
        ready_after_s = starter.ready_s - starter.started_s
        rows = read_topic(session, address, topic)
        print_table(
            [[str(p), str(o), v] for p, o, v in rows], ["partition", "offset", "value"], indent
        )
        ok = [(p, v) for p, _, v in rows] == sorted(expected)
        say(
            f"{indent}Spark read {len(rows)} rows in {time.monotonic() - read_started_s:.1f} s "
            f"(Spark was ready {ready_after_s:.1f} s after the demo began, having started "
            "while the acts above ran): " + ("the same committed records" if ok else "MISMATCH")
        )
    finally:
        starter.stop(keep_log=not ok)
    return 0 if ok else 1
