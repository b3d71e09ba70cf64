"""Read-process-write with offsets inside transactions, SIGKILLed at random points and restarted:
the output holds each input record exactly once (seeds 000 and KIP-447)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkout import ROOT

from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch
from twinlog.engine.records.batch_reader import iter_batches

INPUT_RECORDS = 240
pytestmark = pytest.mark.crash


def test_read_process_write_is_exactly_once_across_kills(tmp_path: Path) -> None:
    with Broker.open(tmp_path) as broker:
        broker.create_topic("input")
        broker.create_topic("output")
        for start in range(0, INPUT_RECORDS, 10):
            broker.produce(
                "input", 0, build_batch([f"v{i}".encode() for i in range(start, start + 10)])
            )
    rng = random.Random(447)
    failpoints = [
        "coordinator.after_prepare",
        "coordinator.after_apply",
        "copier.after_batch",
        "journal.after_sync",
        "log.after_fsync",
    ]
    kills = 0
    for attempt in range(60):
        environment = dict(os.environ)
        if attempt < 40:
            environment["TWINLOG_FAILPOINTS"] = (
                f"{rng.choice(failpoints)}=crash@{rng.randint(1, 12)}"
            )
        else:
            environment.pop("TWINLOG_FAILPOINTS", None)
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.workers.read_process_write", str(tmp_path)],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if 40 <= attempt < 50:
            time.sleep(rng.uniform(0.5, 1.2))
            process.send_signal(signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=120)
        if process.returncode == -signal.SIGKILL:
            kills += 1
            continue
        assert process.returncode == 0, stderr
        if "DONE" in stdout and attempt >= 50:
            break
    else:
        pytest.fail("the loop never finished consuming its input")
    assert kills >= 20, f"only {kills} kills happened"
    with Broker.open(tmp_path) as broker:
        result = broker.fetch("output", 0, 0, max_bytes=1 << 30)
        values = [r.value for b in iter_batches(result.records) for r in b.records()]
    assert sorted(values) == sorted(f"out-v{i}".encode() for i in range(INPUT_RECORDS))
    assert len(values) == INPUT_RECORDS
