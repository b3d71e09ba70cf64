"""``python -m bench`` / ``twinlog bench``: the end-to-end comparison, in one run.

Every contender writes the same records: 1 KiB of random bytes, 1,000 per
transaction over 4 partitions (250 each; ``--records-per-transaction`` changes it),
``--transactions`` transactions each.

Client and server: a ``twinlog serve`` process (default broker settings, a
temporary data directory) and a client process (``bench.e2e.client``) on loopback:

    transactional   1,000 x 1 KiB records per transaction over 4 partitions, commit each
    plain           the same records, idempotent producer, no transactions

Embedded (``bench.e2e.embedded``): a ``Broker`` opened in this process (default
settings: ``--server-config`` is the server's alone; its data in the work directory)
and the public ``Producer`` on it, with the client process's producer settings:

    embedded        per transaction: begin, send() per record, flush, commit
    embedded-batch  the same with one send_batch() per partition (250 values)

SQLite in-process, WAL + synchronous=FULL, one INSERT per record:

    sqlite-execute  1,000 inserts per transaction, one execute() call per row
    sqlite-1000     1,000 inserts per transaction, one executemany() call
    sqlite-100      100 inserts per transaction, one executemany() call

Reported: records/s and MiB/s of each, and the ratios of like with like:

    transactional / plain              goal >= 0.8
    embedded / sqlite-execute          a call per record on both sides
    embedded-batch / sqlite-1000       a call per batch on both sides; goal >= 1.5
                                       (embedded with the batch API >= 1.5x SQLite)
    transactional / sqlite-1000        goal >= 1.0 (end to end over gRPC >= 1.0x
                                       SQLite WAL FULL)
    transactional / sqlite-100

and, over gRPC, the commit round trip p50/p99, the produce-to-visible lag
p50/p99 (commit acknowledged -> a consumer has read the transaction's last record
on every partition), and what the server spent per 1,000 records of each gRPC
contender (CPU, user and system, and context switches: ``process_cost``, Linux
only). Numbers depend on the machine (the disk's fsync above all):
compare the ratios printed by one run.
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

from bench.e2e import process_cost
from bench.e2e.embedded import measure_embedded
from bench.e2e.sqlite_baseline import run_sqlite
from bench.e2e.workload import Workload

ROOT = Path(__file__).resolve().parent.parent.parent
SERVING = re.compile(r"serving on \S+:(\d+) ")
GOAL_VS_PLAIN = 0.8  # at 1,000 records per transaction
GOAL_VS_PLAIN_LARGE = 0.9  # from LARGE_TRANSACTION_RECORDS on (issue: speed)
LARGE_TRANSACTION_RECORDS = 4000


def goal_vs_plain(records_per_transaction: int) -> float:
    """The transactional / plain goal at this transaction size."""
    if records_per_transaction >= LARGE_TRANSACTION_RECORDS:
        return GOAL_VS_PLAIN_LARGE
    return GOAL_VS_PLAIN


def records_per_transaction(text: str) -> int:
    """argparse type: a positive multiple of the workload's partitions."""
    value = int(text)
    if value <= 0 or value % Workload.partitions:
        raise argparse.ArgumentTypeError(
            f"{value} is not a positive multiple of {Workload.partitions} (the records of a "
            f"transaction are spread evenly over {Workload.partitions} partitions)"
        )
    return value


GOAL_VS_SQLITE = 1.0  # end to end over gRPC: transactional / sqlite-1000
GOAL_EMBEDDED_BATCH_VS_SQLITE = 1.5  # embedded-batch / sqlite-1000 (executemany)
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
         "--warmup", str(workload.warmup_transactions),
         "--records-per-transaction", str(workload.records_per_transaction)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env=environment(),
    )  # fmt: skip
    assert process.stdout is not None
    result: dict[str, float] | None = None
    with process.stdout:  # closed once read to its end
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
        before = process_cost.sample(server.pid)
        plain = run_client(address, "bench-plain", "plain", workload, progress)
        after_plain = process_cost.sample(server.pid)
        transactional = run_client(address, "bench-txn", "transactional", workload, progress)
        after_transactional = process_cost.sample(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    embedded = measure_embedded(directory, workload, progress.update)
    sqlite: dict[int, dict[str, float]] = {}
    for size in (1000, 100):
        phase = f"sqlite-{size}"
        sqlite[size] = run_sqlite(
            directory,
            workload,
            size,
            functools.partial(progress.update, phase),
        )
    sqlite_execute = run_sqlite(
        directory,
        workload,
        workload.records_per_transaction,
        functools.partial(progress.update, "sqlite-execute"),
        per_row=True,
    )

    def ratio(numerator: dict[str, float], denominator: dict[str, float]) -> float:
        return numerator["records_per_s"] / denominator["records_per_s"]

    return {
        "workload": {
            "transactions": workload.transactions,
            "records_per_transaction": workload.records_per_transaction,
            "record_bytes": workload.record_bytes,
            "partitions": workload.partitions,
        },
        "transactional": transactional,
        "plain": plain,
        "embedded": embedded["embedded"],
        "embedded_batch": embedded["embedded_batch"],
        "sqlite_execute_1000": sqlite_execute,
        "sqlite_1000": sqlite[1000],
        "sqlite_100": sqlite[100],
        "ratios": {
            "transactional_vs_plain": ratio(transactional, plain),
            "embedded_vs_sqlite_execute": ratio(embedded["embedded"], sqlite_execute),
            "embedded_batch_vs_sqlite_executemany": ratio(embedded["embedded_batch"], sqlite[1000]),
            "transactional_vs_sqlite_1000": ratio(transactional, sqlite[1000]),
            "transactional_vs_sqlite_100": ratio(transactional, sqlite[100]),
        },
        "goals": {
            "transactional_vs_plain": goal_vs_plain(workload.records_per_transaction),
            "transactional_vs_sqlite": GOAL_VS_SQLITE,
            "embedded_batch_vs_sqlite_executemany": GOAL_EMBEDDED_BATCH_VS_SQLITE,
        },
        "server_log": str(log_path),
        # The server's CPU and context switches per 1,000 records each gRPC client sent
        # (warm-up and lag probes included: the server did that work too); {} off Linux.
        "server_cost": {
            "plain": _cost_per_thousand(before, after_plain, plain_records(workload)),
            "transactional": _cost_per_thousand(
                after_plain,
                after_transactional,
                transactional_records(workload, int(transactional["lag_probes"])),
            ),
        },
    }


def plain_records(workload: Workload) -> int:
    """Records the plain client sends: its warm-up and measured batches."""
    return (workload.warmup_transactions + workload.transactions) * (
        workload.records_per_transaction
    )


def transactional_records(workload: Workload, lag_probes: int) -> int:
    """Records the transactional client sends: warm-up, measured and lag-probe transactions."""
    transactions = workload.warmup_transactions + workload.transactions + lag_probes
    return transactions * workload.records_per_transaction


def _cost_per_thousand(
    before: process_cost.ProcessCost | None, after: process_cost.ProcessCost | None, records: int
) -> dict[str, float]:
    if before is None or after is None or records <= 0:
        return {}
    return after.minus(before).per(records / 1000)


CONTENDERS = [
    ("transactional", "transactional", "gRPC client + server, commit per {records:,} records"),
    ("plain", "plain", "gRPC client + server, idempotent, no transactions"),
    ("embedded", "embedded", "in-process Broker, Producer.send per record, commit"),
    ("embedded-batch", "embedded_batch", "in-process Broker, send_batch per partition"),
    ("sqlite-execute", "sqlite_execute_1000", "WAL FULL, execute per row, {records:,}/txn"),
    ("sqlite-1000", "sqlite_1000", "WAL FULL, executemany, 1,000/txn"),
    ("sqlite-100", "sqlite_100", "WAL FULL, executemany, 100/txn"),
]


def print_table(results: dict[str, Any]) -> None:
    records = results["workload"]["records_per_transaction"]
    print(f"\n{'contender':<16}{'records/s':>12}{'MiB/s':>9}{'seconds':>9}  what")
    for name, key, what in CONTENDERS:
        row = results[key]
        print(
            f"{name:<16}{row['records_per_s']:>12,.0f}{row['mib_per_s']:>9.1f}"
            f"{row['elapsed_s']:>9.2f}  {what.format(records=records)}"
        )
    ratios = results["ratios"]
    txn = results["transactional"]

    def verdict(value: float, goal: float) -> str:
        return "meets goal" if value >= goal else "BELOW goal"

    print()
    for label, key, goal in (
        ("transactional / plain", "transactional_vs_plain", goal_vs_plain(records)),
        ("embedded / sqlite-execute", "embedded_vs_sqlite_execute", None),
        (
            "embedded-batch / sqlite-1000",
            "embedded_batch_vs_sqlite_executemany",
            GOAL_EMBEDDED_BATCH_VS_SQLITE,
        ),
        ("transactional / sqlite-1000", "transactional_vs_sqlite_1000", GOAL_VS_SQLITE),
        ("transactional / sqlite-100", "transactional_vs_sqlite_100", None),
    ):
        value = ratios[key]
        line = f"{label:<30}{value:6.2f}"
        if goal is not None:
            line += f"  (goal >= {goal}: {verdict(value, goal)})"
        print(line)
    print(
        f"commit round trip   p50 {txn['commit_p50_ms']:7.1f} ms   p99 {txn['commit_p99_ms']:7.1f} ms"
        "   (gRPC)"
    )
    for name, key in (("embedded", "embedded"), ("embedded-batch", "embedded_batch")):
        row = results[key]
        print(
            f"commit              p50 {row['commit_p50_ms']:7.1f} ms   "
            f"p99 {row['commit_p99_ms']:7.1f} ms   ({name})"
        )
    print(
        f"produce-to-visible  p50 {txn['visible_lag_p50_ms']:7.1f} ms   "
        f"p99 {txn['visible_lag_p99_ms']:7.1f} ms   ({txn['lag_probes']:.0f} probes)"
    )
    for name, cost in results.get("server_cost", {}).items():
        if cost:
            print(
                f"server per 1,000 records ({name}): CPU {cost['cpu_ms']:.1f} ms "
                f"(user {cost['user_ms']:.1f}, system {cost['system_ms']:.1f}), "
                f"{cost['context_switches']:.0f} context switches"
            )


EXAMPLE = """
example:
  twinlog bench
  python -m bench --transactions 50 --json results.json
  python -m bench --transactions 25 --records-per-transaction 4000
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
        "--records-per-transaction", type=records_per_transaction,
        default=Workload.records_per_transaction, metavar="N",
        help=f"records per transaction, a multiple of {Workload.partitions} (default "
        f"{Workload.records_per_transaction:,}; the transactional / plain goal is "
        f"{GOAL_VS_PLAIN} there and {GOAL_VS_PLAIN_LARGE} from {LARGE_TRANSACTION_RECORDS:,})",
    )  # fmt: skip
    add_output_arguments(parser, "no progress bar")
    parser.add_argument(
        "--server-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to twinlog serve --config (e.g. log_flush_policy=interval)",
    )
    args = parser.parse_args(argv)
    workload = Workload(
        transactions=args.transactions,
        warmup_transactions=args.warmup,
        records_per_transaction=args.records_per_transaction,
    )
    with work_directory(args.work_dir, "twinlog-bench-") as directory:
        results = measure(workload, directory, Progress(args.quiet), args.server_config)
        results["server_config"] = args.server_config
    print_table(results)
    write_json(results, args.json)
    return 0


def add_output_arguments(parser: argparse.ArgumentParser, quiet_help: str) -> None:
    """The options every benchmark run takes: --json, --work-dir and --quiet."""
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON ('-': stdout)"
    )
    parser.add_argument(
        "--work-dir",
        help="where data and logs go: a new folder inside it per run, kept (default: a "
        "temporary directory, removed)",
    )
    parser.add_argument("--quiet", action="store_true", help=quiet_help)


@contextlib.contextmanager
def work_directory(work_dir: str | None, prefix: str) -> Iterator[Path]:
    """A new folder inside ``work_dir`` (created if need be), kept, so that a second run
    there starts as empty as the first; or a temporary directory removed afterwards."""
    if work_dir:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=work_dir or None))
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
