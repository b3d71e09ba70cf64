"""``python -m bench.scale --tiny --security tokens,tls`` commits small transactions from
1 and 2 producer processes on one node and on three brokers (RF 3), secured both ways:
``tokens`` (the default: bearer tokens and ACLs; on the cluster also mutual TLS between
brokers and a ZooKeeper credential) and ``tls`` (the same and TLS on the client port).
Every figure is a positive number, no transaction failed or was left unknown, the
servers said at start-up that they were secured as the mode says, and the run ends
with the ratio of the two modes at each count. Nothing here compares speeds: the run
is tiny and the machine may be busy."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bench_results import numbers_in
from checkout import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.jvm]  # the cluster half starts a ZooKeeper

RUN_TIMEOUT_S = 1500  # about 70 s alone for both modes; two busy cores may take far longer
MODES = ("tokens", "tls")
COUNTS = ("failed", "unknown")  # must be 0, so not "positive"
# An idle one-node server may spend no clock tick of CPU in the tiny run's idle second.
MAY_BE_ZERO = ("idle_cpu_ms_per_s", "idle_context_switches_per_s")
# What ``twinlog serve`` says of its client port at start-up, in each mode.
SAID = {
    "tokens": re.compile(r"no TLS, \d+ bearer tokens, \d+ ACL grants"),
    "tls": re.compile(r"TLS, \d+ bearer tokens, \d+ ACL grants"),
}
REGISTERED = re.compile(r"registered as broker \d+ at (\S+) for clients, (\S+) for brokers")


def test_tiny_secured_runs_report_every_figure(tmp_path: Path) -> None:
    cluster = shutil.which("java") is not None and importlib.util.find_spec("pyspark") is not None
    report = tmp_path / "scale.json"
    work = tmp_path / "work"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    completed = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--tiny", "--quiet", "--json", str(report),
         "--security", ",".join(MODES), "--work-dir", str(work),
         *([] if cluster else ["--no-cluster"])],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "one node 2 producers / SQLite" in completed.stdout
    for mode in MODES:
        assert f"security {mode}: " in completed.stdout, completed.stdout
    results = json.loads(report.read_text())
    assert results["settings"]["security"] == list(MODES)

    kinds = ("one_node", "rf3") if cluster else ("one_node",)
    deployments = results["deployments"]
    assert set(deployments) == {f"{kind}/{mode}" for kind in kinds for mode in MODES}
    for name, deployment in deployments.items():
        kind, mode = name.split("/")
        assert (deployment["kind"], deployment["security"]) == (kind, mode)
        assert len(deployment["servers_said"]) == (3 if kind == "rf3" else 1), name
        for said in deployment["servers_said"]:
            assert SAID[mode].fullmatch(said), (name, said)
        rows = deployment["rows"]
        assert [row["producers"] for row in rows] == [1, 2], name
        for row in rows:
            assert row["security"] == mode, (name, row)
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
    assert set(results["headline"]["one_node_vs_sqlite"]) == set(MODES)

    ratios = results["security_ratios"]
    assert [(r["kind"], r["numerator"], r["denominator"]) for r in ratios] == [
        (kind, "tls", "tokens") for kind in kinds
    ]
    for ratio in ratios:
        assert list(ratio["transactions_per_s"]) == ["1", "2"], ratio
    assert "tls / tokens" in completed.stdout
    if cluster:
        for mode in MODES:
            assert all("rf3_vs_one_node" in row for row in deployments[f"rf3/{mode}"]["rows"])
            # Secured brokers serve each other on a listener of their own (mutual TLS).
            logs = sorted(work.glob(f"*/{mode}/cluster/broker-*.log"))
            assert len(logs) == 3, logs
            for log in logs:
                registered = REGISTERED.search(log.read_text(errors="replace"))
                assert registered is not None, log
                assert registered.group(1) != registered.group(2), registered.group(0)
