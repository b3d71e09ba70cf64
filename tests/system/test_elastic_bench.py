"""``python -m bench.elastic --tiny`` runs every phase (a partition moved to another
broker without and with a throttle, a preferred-leader election under acknowledged
writes, a fourth broker given its share by a rebalance) and
reports every figure as a number. Nothing here compares speeds: the sizes are tiny."""

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

pytestmark = [pytest.mark.slow, pytest.mark.crash]

RUN_TIMEOUT_S = 900  # ~15 s alone


def test_tiny_elastic_run_reports_every_figure(tmp_path: Path) -> None:
    if shutil.which("java") is None or importlib.util.find_spec("pyspark") is None:
        pytest.skip("the benchmark's ZooKeeper needs Java and PySpark's jars")
    report = tmp_path / "elastic.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    completed = subprocess.run(
        [sys.executable, "-m", "bench.elastic", "--tiny", "--quiet", "--json", str(report),
         "--work-dir", str(tmp_path / "work")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "rebalance giving broker 4 its share" in completed.stdout
    results = json.loads(report.read_text())
    for where, number in numbers_in({k: v for k, v in results.items() if k != "machine"}):
        assert math.isfinite(number) and number >= 0, f"{where} is {number}"
    for phase in ("catch_up", "catch_up_throttled"):
        assert results[phase]["bytes"] > 0 and results[phase]["mib_per_s"] > 0
    spread = results["rebalance"]
    assert spread["moves_of_the_topic"] > 0 and spread["bytes_to_new_broker"] > 0
    after = spread["replicas_after"]
    assert max(after.values()) - min(after.values()) <= 1, after  # the new broker's share
    election = results["election"]
    assert election["new_leader"] != election["old_leader"], election
    assert election["writes_acknowledged"] > 0 and election["pause_ms"] > 0, election
