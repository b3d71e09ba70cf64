"""A short run of ``bench.load``: 64 producers and 1,000 open transactions against a server.

Asserts correctness (the benchmark's own data check, open transaction counts, the
server answering throughout and after) and bounded memory with a wide margin, never
speed: the machine running the tests may be slow or busy. The full run of the issue
(a minute) is ``python -m bench.load`` with its defaults.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from server_process import ROOT, environment

pytestmark = [pytest.mark.slow]

SECONDS = 8
PRODUCERS = 64
OPEN_TRANSACTIONS = 1000


def test_load_run_keeps_every_promise(tmp_path: Path) -> None:
    results_path = tmp_path / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench.load", "--seconds", str(SECONDS),
         "--producers", str(PRODUCERS), "--open-transactions", str(OPEN_TRANSACTIONS),
         "--records-per-transaction", "10", "--work-dir", str(tmp_path / "work"),
         "--json", str(results_path), "--quiet"],
        capture_output=True, text=True, cwd=ROOT, env=environment(), timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = json.loads(results_path.read_text())
    assert results["problems"] == [], results["problems"]
    assert results["held_transactions"] == OPEN_TRANSACTIONS
    opened = results["open_transactions"]
    assert opened["before"] == OPEN_TRANSACTIONS
    assert opened["midway"] >= OPEN_TRANSACTIONS  # held ones plus the producers' own
    assert opened["after"] == 0
    assert results["committed_transactions"] > 0
    assert results["unknown_transactions"] == 0 and results["failed_transactions"] == 0
    assert results["records_read"] == results["committed_records"]
    assert results["fetches"] > 0  # the fetcher was answered while the load ran
    rss = results["rss_mib"]
    assert min(rss["idle"], rss["holding"], rss["max"], rss["end"], *rss["quarters"]) > 0
    # Bounded memory, with room for a noisy allocator (seen: 46 MiB idle, +6 MiB holding
    # 1,000 transactions, 59..63 MiB per quarter): an open transaction costs well under
    # 16 KiB of server memory, and memory does not keep growing while the load runs.
    assert rss["holding"] - rss["idle"] <= OPEN_TRANSACTIONS * 16 / 1024, rss
    first, *_, last = rss["quarters"]
    assert last <= first * 1.5 + 16, rss
    assert "data check" in completed.stdout and "server RSS" in completed.stdout
