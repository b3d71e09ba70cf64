"""twinlog installs as one namespace: a built wheel works in a fresh virtualenv that also
holds PyPI's ``copier`` and ``rpc`` distributions, whose top-level names ours used to take.

Slow (a wheel build and three installs from the package index or pip's cache), so it
runs in the full suite, not the fast lane.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkout import copy_of_checkout

pytestmark = pytest.mark.slow

INSTALL_TIMEOUT_S = 600
CHECK = """
import importlib.util, sys, tempfile
import twinlog
from twinlog import Admin, Broker, Consumer, Producer, ProducerFencedError
assert importlib.util.find_spec("twinlog.connectors.spark") is not None  # needs the spark extra to run

# PyPI's copier and rpc keep their own names; ours live under twinlog.
for name in ("copier", "rpc"):
    origin = importlib.util.find_spec(name).origin
    assert "/site-packages/" + name + "/" in origin, (name, origin)
    ours = importlib.util.find_spec("twinlog." + name).origin
    assert "/site-packages/twinlog/" + name + "/" in ours, ours
for name in ("engine", "journal", "connectors"):
    assert importlib.util.find_spec(name) is None, name + " is installed at the top level"

with tempfile.TemporaryDirectory() as directory, Broker.open(directory) as broker:
    Admin(broker).create_topic("orders", partitions=2)
    producer = Producer(broker, transactional_id="wheel")
    producer.init_transactions()
    with producer.transaction():
        producer.send("orders", b"paid", key=b"order-1")
        producer.send("orders", b"shipped", key=b"order-2")
    producer.close()
    consumer = Consumer(broker)
    consumer.assign([("orders", 0), ("orders", 1)])
    consumer.seek_to_beginning()
    received = []
    for _ in range(50):
        received += consumer.poll(timeout_ms=100)
        if len(received) >= 2:
            break
    consumer.close()
    print(twinlog.__version__, sorted(record.value.decode() for record in received))
"""


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with PyPI's copier and rpc, then twinlog's wheel (its bin folder)."""
    folder = tmp_path_factory.mktemp("wheel")
    wheels = folder / "wheels"
    # Built from a copy: setuptools builds in the source folder, which would be the
    # checkout's (shared with a developer's build and any other test's).
    source = copy_of_checkout(folder / "source")
    # The build's requirements are the test environment's (the test extra lists them):
    # no isolated environment to fill, and the compiled twins at -O0, which is all
    # this test asks of them (that they are built and chosen), in a third of the time.
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        wheels,
        source,
        cwd=folder,
        env={**os.environ, "CFLAGS": "-O0"},
    )
    (wheel,) = wheels.glob("twinlog-*.whl")
    venv = folder / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=folder)
    pip = venv / "bin" / "pip"
    _run(pip, "install", "-q", "--no-deps", "copier", "rpc", cwd=folder)
    _run(pip, "install", "-q", wheel, cwd=folder)
    return venv / "bin"


def test_the_wheel_installs_beside_pypis_copier_and_rpc(installed: Path, tmp_path: Path) -> None:
    # Outside the checkout, so nothing of it is on the path.
    output = _run(installed / "python", "-c", CHECK, cwd=tmp_path)
    version, values = output.split(" ", 1)
    assert values.strip() == "['paid', 'shipped']", output
    # the wheel ships the compiled hot loops (built with a C compiler, as CI has)
    assert _run(installed / "twinlog", "--version", cwd=tmp_path).strip() == (
        f"twinlog {version}, hot loops: compiled (record decoder, batch builder)"
    )


def test_the_wheels_command_line_serves_produces_and_consumes(
    installed: Path, tmp_path: Path
) -> None:
    twinlog = installed / "twinlog"
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [twinlog, "serve", "--data-dir", tmp_path / "data", "--port", "0"],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        address = ""
        deadline = time.monotonic() + 30
        while not address and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.1)
            for line in log_path.read_text().splitlines():
                if "serving on " in line:
                    address = line.split("serving on ", 1)[1].split()[0]
        assert address, log_path.read_text()
        server_flag = f"--server={address}"
        _run(twinlog, "topics", "create", "events", "--partitions", "1", server_flag, cwd=tmp_path)
        produce = subprocess.run(
            [twinlog, "produce", "events", server_flag],
            input="one\ntwo\n",
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert produce.returncode == 0, produce.stderr
        consumed = _run(
            twinlog, "consume", "events", "--from-beginning", "--max-messages", "2", server_flag,
            cwd=tmp_path,
        )  # fmt: skip
        assert consumed.split() == ["one", "two"], consumed
    finally:
        server.terminate()
        server.wait(timeout=30)
