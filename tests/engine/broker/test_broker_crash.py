"""SIGKILL the broker's process at every named failpoint and at random times; check the promises.

A worker subprocess runs transactions over an embedded broker and prints each
commit the broker acknowledged; it is killed (a real kill -9, by a failpoint or
by this test). The broker is then reopened here and every partition is read:

- every acknowledged transaction is present, whole (durable, atomic);
- every value appears at most once (exactly once);
- each transaction's values are contiguous and in send order in each partition;
- an unacknowledged transaction is present whole or not at all.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from checkout import ROOT

from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_reader import iter_batches

PARTITIONS = 3
FIRST_COMMIT_WAIT_S = 60.0
pytestmark = pytest.mark.crash


def run_worker(
    data_dir: Path,
    transactions: int,
    failpoint: str | None = None,
    kill_after_s: float | None = None,
    start: int = 0,
) -> tuple[set[int], int]:
    environment = dict(os.environ)
    environment.pop("TWINLOG_FAILPOINTS", None)
    # armed by the worker once open, the topic created and its producer initialised
    environment["TXN_WRITER_FAILPOINTS"] = failpoint or ""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.workers.txn_writer",
            str(data_dir),
            str(transactions),
            str(start),
        ],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kill_after_s is not None:
        # The kill lands ``kill_after_s`` after the worker's first commit, not after its
        # start: on a loaded machine the start alone can take longer than the whole window.
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + FIRST_COMMIT_WAIT_S
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break  # the worker ended (or died) before committing
            lines.append(line)
            if line.startswith("COMMITTED"):
                break
        time.sleep(kill_after_s)
        process.send_signal(signal.SIGKILL)
        rest, stderr = process.communicate(timeout=120)
        stdout = "".join(lines) + rest
    else:
        stdout, stderr = process.communicate(timeout=120)
    if process.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"worker failed with {process.returncode}:\n{stderr}")
    committed = {
        int(line.split()[1]) for line in stdout.splitlines() if line.startswith("COMMITTED")
    }
    return committed, process.returncode


def expected_values(number: int) -> dict[int, list[str]]:
    return {
        partition: [f"t{number}-p{partition}-{i}" for i in range(6)]
        for partition in sorted({number % PARTITIONS, (number + 1) % PARTITIONS})
    }


def check_promises(data_dir: Path, acknowledged: set[int]) -> dict[str, int]:
    """Reopen, let recovery finish, read everything; return counts, assert the promises."""
    with Broker.open(data_dir) as broker:
        deadline = time.monotonic() + 10
        while any(t.state.value.startswith("PREPARE") for t in broker.list_transactions()):
            assert time.monotonic() < deadline, "prepared transactions were not completed"
            time.sleep(0.05)
        logs: dict[int, list[str]] = {}
        for partition in range(PARTITIONS):
            result = broker.fetch("crash", partition, 0, max_bytes=1 << 30)
            logs[partition] = [
                r.value.decode()
                for b in iter_batches(result.records)
                for r in b.records()  # type: ignore[union-attr]
            ]
    present: dict[int, dict[int, list[str]]] = defaultdict(dict)
    for partition, values in logs.items():
        assert len(values) == len(set(values)), f"duplicate values in partition {partition}"
        for value in values:
            number = int(value.split("-")[0][1:])
            present[number].setdefault(partition, []).append(value)
        # contiguity: each transaction's values form one run, in order
        runs = [int(v.split("-")[0][1:]) for v in values]
        seen_done: set[int] = set()
        for index, number in enumerate(runs):
            if index and runs[index - 1] != number:
                seen_done.add(runs[index - 1])
            assert number not in seen_done, f"transaction {number} is torn in partition {partition}"
    for number, partitions in present.items():
        assert partitions == expected_values(number), (
            f"transaction {number} is partial: {partitions}"
        )
    missing = acknowledged - set(present)
    assert not missing, f"acknowledged commits lost: {sorted(missing)}"
    return {"acknowledged": len(acknowledged), "present": len(present)}


FAILPOINTS = [
    "coordinator.after_prepare=crash@2",
    "coordinator.after_apply=crash@3",
    "copier.after_applying_record=crash@2",
    "copier.after_batch=crash@3",
    "copier.after_log_fsync=crash@2",
    "copier.after_applied_record=crash@4",
    # Counted from the first transaction on (the worker arms them once set up).
    "journal.before_sync=crash@2",
    "journal.after_sync=crash@4",
    "log.before_fsync=crash@3",
    "log.after_fsync=crash@4",
]


@pytest.mark.parametrize("failpoint", FAILPOINTS)
def test_kill_at_failpoint_then_recover(tmp_path: Path, failpoint: str) -> None:
    acknowledged, returncode = run_worker(tmp_path, 6, failpoint)
    assert returncode == -signal.SIGKILL, f"failpoint {failpoint} was never reached"
    check_promises(tmp_path, acknowledged)
    # The broker keeps working after recovery: a new run commits on top.
    more, returncode = run_worker(tmp_path, 2, start=100)
    assert returncode == 0 and more == {100, 101}
    check_promises(tmp_path, acknowledged | more)


def test_kill_at_random_times(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    acknowledged: set[int] = set()
    for round_number in range(5):
        committed, _ = run_worker(
            tmp_path, 200, kill_after_s=rng.uniform(0.0, 0.9), start=round_number * 1000
        )
        acknowledged |= committed
        check_promises(tmp_path, acknowledged)
    assert acknowledged, "no transaction was ever committed: the kills came too early"


def test_restart_completes_prepared_transactions_and_keeps_ongoing_ones(tmp_path: Path) -> None:
    """A broker killed with ONGOING, PREPARE_COMMIT and PREPARE_ABORT transactions in its
    journal: after the restart the prepared ones complete (the commit whole, the abort
    absent), an ongoing one can still commit, and one whose timeout runs out is aborted."""
    data_dir = tmp_path / "data"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.workers.three_states", str(data_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else "no output"
        described = json.loads(line)
    finally:
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)  # reaps it and closes its pipes
    killed_at = time.monotonic()
    with Broker.open(data_dir, transaction_check_interval_ms=100) as broker:
        states = {t.transactional_id: t.state.value for t in broker.list_transactions()}
        assert states.get("ongoing") == "ONGOING" and states.get("expiring") == "ONGOING"
        ongoing = described["ongoing"]
        broker.commit_transaction(
            ongoing["transaction_id"],
            ongoing["producer_id"],
            ongoing["producer_generation"],
            wait_for_applied=True,
        )
        deadline = time.monotonic() + 20
        while broker.list_transactions() and time.monotonic() < deadline:
            time.sleep(0.05)  # the prepared two complete; "expiring" runs out its 3 s
        assert broker.list_transactions() == []
        assert time.monotonic() - killed_at < 20
        for partition in (0, 1):
            fetched = broker.fetch("states", partition, 0, max_bytes=1 << 20)
            values = sorted(r.value for b in iter_batches(fetched.records) for r in b.records())
            assert values == [f"committing-{partition}".encode(), f"ongoing-{partition}".encode()]
        identity = broker.init_producer("expiring")  # its successor is not held up
        assert identity.producer_generation == described["expiring"]["producer_generation"] + 1
