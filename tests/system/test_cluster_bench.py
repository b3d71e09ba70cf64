"""``python -m bench.cluster --tiny`` runs every phase (a single node, ZooKeeper, three
brokers, SIGKILL and SIGTERM failovers, coordinator failovers with 0 and 20 open
transactions, a follower's catch-up, replica_fsync off) and reports every figure as a
number. Nothing here compares speeds: the sizes are tiny and the figures meaningless,
and a slow machine only makes the run longer."""

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

RUN_TIMEOUT_S = 1800  # the tiny run takes ~20 s alone; two busy cores may take far longer


def test_tiny_run_reports_every_figure(tmp_path: Path) -> None:
    if shutil.which("java") is None or importlib.util.find_spec("pyspark") is None:
        pytest.skip("the cluster benchmark's ZooKeeper needs Java and PySpark's jars")
    report = tmp_path / "cluster.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    completed = subprocess.run(
        [sys.executable, "-m", "bench.cluster", "--tiny", "--quiet", "--json", str(report),
         "--work-dir", str(tmp_path / "work")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "leader failover after SIGKILL" in completed.stdout
    assert "transaction coordinator failover after SIGKILL" in completed.stdout
    results = json.loads(report.read_text())

    figures = {k: v for k, v in results.items() if k not in ("settings", "machine")}
    for where, number in numbers_in(figures):
        assert math.isfinite(number) and number >= 0, f"{where} is {number}"
    single, cluster = results["single_node"], results["cluster"]
    headline = [
        single["plain"]["records_per_s"],
        cluster["plain"]["records_per_s"],
        single["transactional"]["records_per_s"],
        cluster["transactional"]["records_per_s"],
        cluster["latency"]["produce_p50_ms"],
        cluster["latency"]["produce_p99_ms"],
        cluster["transactional"]["commit_p50_ms"],
        cluster["transactional"]["commit_p99_ms"],
        cluster["catch_up"]["catch_up_mib_per_s"],
        results["failover_sigkill_median_s"]["session_expiry"],
        results["failover_sigkill_median_s"]["client_first_ack_s"],
        results["failover_sigterm_median_s"]["client_first_ack_s"],
        results["no_replica_fsync"]["plain"]["records_per_s"],
        *results["ratios"].values(),
    ]
    coordinator_rounds = cluster["coordinator_failover"]
    assert [r["open_transactions"] for r in coordinator_rounds] == [20]
    for figures in coordinator_rounds:
        headline += [
            figures["new_leader_written_s"],
            figures["coordinator_answers_s"],
            figures["first_commit_s"],
        ]
        assert set(figures["phases_s"]) == {
            "session_expiry",
            "controller_reaction",
            "coordinator_load",
            "client_commit",
        }
        assert 0 <= figures["still_open"]["ongoing"] <= figures["open_transactions"]
        assert 0 <= figures["sample_committed"] <= figures["sample"]
    assert all(number > 0 for number in headline), headline
