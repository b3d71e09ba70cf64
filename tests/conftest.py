"""What every test folder shares.

The folders mirror the package's floors: ``tests/engine/log`` tests
``twinlog.engine.log``, ``tests/rpc/server`` tests ``twinlog.rpc.server``, and so
on (``tests/test_floors.py`` checks that each names a real floor). ``tests/system``
runs whole processes and kills them; ``tests/support`` holds helpers that several
folders import (it is on the path through pytest's ``pythonpath`` setting).

Markers (``--strict-markers``): ``slow`` is left out of the fast lane
(``pytest -m "not slow"``, under a minute); ``crash`` kills a real process with
SIGKILL; ``spark`` needs PySpark and Java; ``jvm`` starts a Java process (ZooKeeper,
Spark); ``kafka_client`` runs a Kafka client library against the listener. Every
``crash``, ``spark``, ``jvm`` and ``kafka_client`` test and every test in
``tests/system`` counts as ``slow`` too (marked below, at collection): the fast lane
starts no JVM and no Kafka client. A guard holds it to that: a test outside ``slow``
that starts ``java`` or builds a kafka-python client fails, saying to mark it.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from twinlog.engine.base import failpoints

# The SparkSession and the server the Spark tests share: session-scoped, and started
# only when a test first asks for them.
pytest_plugins = ["spark_support"]


SYSTEM_TESTS = Path(__file__).resolve().parent / "system"
JVM_FIXTURES = {"zookeeper", "spark"}  # each starts a Java process for the session
SLOW_MARKERS = ("crash", "spark", "jvm", "kafka_client")
# A test module naming one of these runs Kafka clients against the listener.
KAFKA_CLIENT_NAMES = re.compile(r"\bconfluent_kafka\b|\bKafka(Producer|Consumer|AdminClient)\b")


def _runs_a_kafka_client(path: Path, seen: dict[Path, bool]) -> bool:
    if path not in seen:
        seen[path] = KAFKA_CLIENT_NAMES.search(path.read_text()) is not None
    return seen[path]


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """On two workers (``-n 2``, the README's test command) every test of tests/system is
    one unit of work, run on one worker, one after another: the whole-process tests
    (clusters, kills, ZooKeeper sessions, timing bounds) never share the machine with one
    another, only with the other tests. Each other module is a unit of its own: its
    module-scoped fixtures (a server, a browser, a wheel built in the checkout) are made
    once, on one worker, and its tests run in their order, as they do without workers.
    The largest unit goes first (xdist orders them by size), so the other worker takes
    the rest.
    (xdist's own ``--dist loadgroup`` marks its groups in the node ids, which pytest 9
    no longer lets a plugin change.) A ``--dist`` given on the command line is kept."""
    if config.getvalue("dist") != "load":  # -n alone means "load"
        return None
    from xdist.scheduler import LoadScopeScheduling

    system_unit = SYSTEM_TESTS.relative_to(config.rootpath).as_posix()  # as node ids say it

    class SystemTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(system_unit + "/"):
                return system_unit
            return nodeid.split("::", 1)[0]  # its module

    return SystemTestsTogether(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    kafka_modules: dict[Path, bool] = {}
    for item in items:
        if JVM_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.jvm)
        if _runs_a_kafka_client(item.path, kafka_modules):
            item.add_marker(pytest.mark.kafka_client)
        if item.path.is_relative_to(SYSTEM_TESTS) or any(
            item.get_closest_marker(name) for name in SLOW_MARKERS
        ):
            item.add_marker(pytest.mark.slow)


# The guard: which test runs now, and whether it may start a JVM or a Kafka client.
_running: dict[str, Any] = {"item": None}


def _refuse_in_the_fast_lane(what: str) -> None:
    item = _running["item"]
    if item is not None and not item.get_closest_marker("slow"):
        raise AssertionError(
            f"{item.nodeid} {what} but is in the fast lane: mark it "
            "@pytest.mark.jvm or @pytest.mark.kafka_client (both count as slow)"
        )


def pytest_configure(config: pytest.Config) -> None:
    real_popen_init = subprocess.Popen.__init__

    def guarded_popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        program = args[0] if isinstance(args, (list, tuple)) and args else args
        if isinstance(program, (str, Path)) and Path(str(program)).name == "java":
            _refuse_in_the_fast_lane("starts java")
        real_popen_init(self, args, *rest, **kw)

    subprocess.Popen.__init__ = guarded_popen_init  # type: ignore[method-assign]
    try:
        import kafka.client_async
    except ImportError:
        return
    real_client_init = kafka.client_async.KafkaClient.__init__

    def guarded_client_init(self: Any, *args: Any, **kwargs: Any) -> None:
        _refuse_in_the_fast_lane("builds a kafka-python client")
        real_client_init(self, *args, **kwargs)

    kafka.client_async.KafkaClient.__init__ = guarded_client_init  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    _running["item"] = item
    try:
        yield
    finally:
        _running["item"] = None


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    """Disarms every failpoint before and after every test, whatever happened: a test
    that fails with one armed must not fail every test after it."""
    failpoints.disarm_all()
    try:
        yield
    finally:
        failpoints.disarm_all()
