"""``python -m bench`` / ``twinlog bench``: the end-to-end comparison, in one run.

A ``twinlog serve`` process (default broker settings, a temporary data
directory) and a client process (``bench.e2e.client``) on loopback:

    transactional   1,000 x 1 KiB records per transaction over 4 partitions, commit each
    plain           the same records, idempotent producer, no transactions
    sqlite-1000     SQLite in-process, WAL + synchronous=FULL, 1,000 inserts per transaction
    sqlite-100      the same, 100 inserts per transaction

Reported: throughput of each; transactional / plain (goal >= 0.6); transactional /
sqlite (goal >= 1.5); commit round trip p50/p99; produce-to-visible lag p50/p99
(commit acknowledged -> a consumer has read the transaction's last record on every
partition). Numbers depend on the machine (the disk's fsync above all): compare
the ratios printed by one run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.e2e.sqlite_baseline import run_sqlite
from bench.e2e.workload import Workload

ROOT = Path(__file__).resolve().parent.parent.parent
SERVING = re.compile(r"serving on \S+:(\d+) ")
GOAL_VS_PLAIN = 0.6
GOAL_VS_SQLITE = 1.5
BAR_WIDTH = 30


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet or not sys.stderr.isatty()
        self.last_phase = ""

    def update(self, phase: str, done: int, total: int) -> None:
        if self.quiet:
            if phase != self.last_phase:
                print(f"bench: {phase} ...", file=sys.stderr, flush=True)
                self.last_phase = phase
            return
        filled = int(BAR_WIDTH * done / max(1, total))
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        print(f"\r{phase:<14} [{bar}] {done}/{total}", end="", file=sys.stderr, flush=True)
        if done >= total:
            print(file=sys.stderr, flush=True)


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def start_server(
    directory: Path, server_config: Sequence[str] = ()
) -> tuple[subprocess.Popen[bytes], str, Path]:
    log_path = directory / "server.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "twinlog.rpc.cli", "serve", "--data-dir", str(directory / "data"),
             "--port", "0", *(f"--config={pair}" for pair in server_config)],
            stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT, env=environment(),
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = SERVING.search(log_path.read_text(errors="replace"))
        if found:
            return process, f"127.0.0.1:{found.group(1)}", log_path
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise RuntimeError("the server did not start:\n" + log_path.read_text(errors="replace"))


def run_client(
    address: str, topic: str, mode: str, workload: Workload, progress: Progress
) -> dict[str, float]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.e2e.client", "--server", address, "--topic", topic,
         "--mode", mode, "--transactions", str(workload.transactions),
         "--warmup", str(workload.warmup_transactions)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env=environment(),
    )  # fmt: skip
    assert process.stdout is not None
    result: dict[str, float] | None = None
    for line in process.stdout:
        if line.startswith("progress "):
            _, done, total = line.split()
            progress.update(mode, int(done), int(total))
        elif line.startswith("result "):
            result = json.loads(line[len("result ") :])
    if process.wait() != 0 or result is None:
        raise RuntimeError(f"the {mode} client failed (exit status {process.returncode})")
    return result


def measure(
    workload: Workload, directory: Path, progress: Progress, server_config: Sequence[str] = ()
) -> dict[str, Any]:
    from twinlog.rpc.client import Admin

    server, address, log_path = start_server(directory, server_config)
    try:
        with Admin(address) as admin:
            admin.create_topic("bench-plain", workload.partitions)
            admin.create_topic("bench-txn", workload.partitions)
        plain = run_client(address, "bench-plain", "plain", workload, progress)
        transactional = run_client(address, "bench-txn", "transactional", workload, progress)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    sqlite: dict[int, dict[str, float]] = {}
    for size in (1000, 100):
        phase = f"sqlite-{size}"
        sqlite[size] = run_sqlite(
            directory,
            workload,
            size,
            functools.partial(progress.update, phase),
        )
    return {
        "workload": {
            "transactions": workload.transactions,
            "records_per_transaction": workload.records_per_transaction,
            "record_bytes": workload.record_bytes,
            "partitions": workload.partitions,
        },
        "transactional": transactional,
        "plain": plain,
        "sqlite_1000": sqlite[1000],
        "sqlite_100": sqlite[100],
        "ratios": {
            "transactional_vs_plain": transactional["records_per_s"] / plain["records_per_s"],
            "transactional_vs_sqlite_1000": transactional["records_per_s"]
            / sqlite[1000]["records_per_s"],
            "transactional_vs_sqlite_100": transactional["records_per_s"]
            / sqlite[100]["records_per_s"],
        },
        "goals": {
            "transactional_vs_plain": GOAL_VS_PLAIN,
            "transactional_vs_sqlite": GOAL_VS_SQLITE,
        },
        "server_log": str(log_path),
    }


def print_table(results: dict[str, Any]) -> None:
    rows = [
        ("transactional", results["transactional"]),
        ("plain", results["plain"]),
        ("sqlite-1000", results["sqlite_1000"]),
        ("sqlite-100", results["sqlite_100"]),
    ]
    print(f"\n{'contender':<15}{'records/s':>12}{'MiB/s':>9}{'seconds':>9}")
    for name, row in rows:
        print(
            f"{name:<15}{row['records_per_s']:>12,.0f}{row['mib_per_s']:>9.1f}{row['elapsed_s']:>9.2f}"
        )
    ratios = results["ratios"]
    txn = results["transactional"]

    def verdict(value: float, goal: float) -> str:
        return "meets goal" if value >= goal else "BELOW goal"

    print(
        f"\ntransactional / plain      {ratios['transactional_vs_plain']:6.2f}  "
        f"(goal >= {GOAL_VS_PLAIN}: {verdict(ratios['transactional_vs_plain'], GOAL_VS_PLAIN)})"
    )
    print(
        f"transactional / sqlite-1000 {ratios['transactional_vs_sqlite_1000']:5.2f}  "
        f"(goal >= {GOAL_VS_SQLITE}: "
        f"{verdict(ratios['transactional_vs_sqlite_1000'], GOAL_VS_SQLITE)})"
    )
    print(f"transactional / sqlite-100  {ratios['transactional_vs_sqlite_100']:5.2f}")
    print(
        f"commit round trip   p50 {txn['commit_p50_ms']:7.1f} ms   p99 {txn['commit_p99_ms']:7.1f} ms"
    )
    print(
        f"produce-to-visible  p50 {txn['visible_lag_p50_ms']:7.1f} ms   "
        f"p99 {txn['visible_lag_p99_ms']:7.1f} ms"
    )


EXAMPLE = """
example:
  twinlog bench
  python -m bench --transactions 50 --json results.json
"""


def main(argv: Sequence[str] | None = None, prog: str = "python -m bench") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=__doc__,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--transactions", type=int, default=Workload.transactions,
        help=f"measured transactions per contender ({Workload.transactions})",
    )  # fmt: skip
    parser.add_argument("--warmup", type=int, default=Workload.warmup_transactions)
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON ('-': stdout)"
    )
    parser.add_argument("--work-dir", help="where data goes (default: a temporary directory)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--server-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to twinlog serve --config (e.g. log_flush_policy=interval)",
    )
    args = parser.parse_args(argv)
    workload = Workload(transactions=args.transactions, warmup_transactions=args.warmup)
    with work_directory(args.work_dir, "twinlog-bench-") as directory:
        results = measure(workload, directory, Progress(args.quiet), args.server_config)
        results["server_config"] = args.server_config
    print_table(results)
    write_json(results, args.json)
    return 0


@contextlib.contextmanager
def work_directory(work_dir: str | None, prefix: str) -> Iterator[Path]:
    """``work_dir`` (created if need be, kept), or a temporary directory removed afterwards."""
    directory = Path(work_dir or tempfile.mkdtemp(prefix=prefix))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        yield directory
    finally:
        if not work_dir:
            shutil.rmtree(directory, ignore_errors=True)


def write_json(results: dict[str, Any], destination: str | None) -> None:
    """Results as JSON to ``destination``: a path, "-" for stdout, or None for nowhere."""
    if destination == "-":
        print(json.dumps(results, indent=2))
    elif destination:
        Path(destination).write_text(json.dumps(results, indent=2) + "\n")
