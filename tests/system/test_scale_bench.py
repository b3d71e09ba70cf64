"""``python -m bench.scale --tiny`` commits small transactions from 1 and 2 producer
processes on one node and on three brokers (RF 3), and against SQLite, and reports
every figure as a positive number, with no transaction failed or left unknown. Nothing
here compares speeds: the run is tiny and the machine may be busy."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bench_results import numbers_in
from checkout import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.jvm]  # the cluster half starts a ZooKeeper

RUN_TIMEOUT_S = 900  # about 45 s alone; two busy cores may take far longer
COUNTS = ("failed", "unknown")  # must be 0, so not "positive"
# An idle one-node server may spend no clock tick of CPU in the tiny run's idle second.
MAY_BE_ZERO = ("idle_cpu_ms_per_s", "idle_context_switches_per_s")


def test_tiny_run_reports_every_figure(tmp_path: Path) -> None:
    cluster = shutil.which("java") is not None and importlib.util.find_spec("pyspark") is not None
    report = tmp_path / "scale.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    completed = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--tiny", "--quiet", "--json", str(report),
         "--work-dir", str(tmp_path / "work"), *([] if cluster else ["--no-cluster"])],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "one node 2 producers / SQLite" in completed.stdout
    results = json.loads(report.read_text())

    deployments = results["deployments"]
    assert set(deployments) == ({"one_node", "rf3"} if cluster else {"one_node"})
    for name, deployment in deployments.items():
        rows = deployment["rows"]
        assert [row["producers"] for row in rows] == [1, 2], name
        for row in rows:
            assert row["failed"] == 0 and row["unknown"] == 0, (name, row)
            assert row["errors"] == [], (name, row["errors"])
            assert row["committed"] > 0, (name, row)
            assert 1 <= row["coordinators_reached"] <= deployment["coordinators"], (name, row)
    figures = {k: v for k, v in results.items() if k not in ("settings", "machine")}
    for where, number in numbers_in(figures):
        name = where.rsplit(".", 1)[-1]
        if name in COUNTS:
            continue
        assert math.isfinite(number), f"{where} is {number}"
        assert number > 0 or (name in MAY_BE_ZERO and number == 0), f"{where} is {number}"
    assert results["sqlite"]["transactions_per_s"] > 0
    assert results["headline"]["producers"] == 2
    if cluster:
        assert all("rf3_vs_one_node" in row for row in deployments["rf3"]["rows"])
