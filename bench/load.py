"""``python -m bench.load``: many producers and many open transactions at once, for a while.

A ``twinlog serve`` process (default settings, a temporary data directory) and
client processes on loopback:

    producers       --producers threads (spread over --client-processes processes), each a
                    transactional Producer running transactions back to back: begin,
                    --records-per-transaction records over the topic's partitions, commit
    held open       --open-transactions more transactions, begun by idle producers (one each,
                    with one batch journaled) and kept open for the whole run, then aborted
    fetcher         this process reads every partition from the start with plain fetches
                    (max_wait_ms 0) and times each round trip
    memory          the server's resident set (VmRSS of /proc/PID/status), sampled throughout

Reported: committed transactions and records per second, commit round trip p50/p99,
fetch round trip p50/p99/max while loaded, the server's memory (idle, once the
transactions are held open, highest, at the end) and how many transactions were open.

Then the data is checked (the run fails otherwise): every record of every committed
transaction is in its partition exactly once, no record of an aborted or held transaction
is, a transaction whose commit outcome is unknown is there whole or not at all, and the
server still answers. Numbers depend on the machine; the checks do not.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.e2e.runner import (
    ROOT,
    add_output_arguments,
    environment,
    start_server,
    work_directory,
    write_json,
)
from bench.e2e.workload import percentile
from twinlog.engine.base.units import MEBIBYTE

TOPIC = "load"
HELD_TIMEOUT_MS = 15 * 60_000  # the broker's maximum: held transactions outlive any run
HOLDER_THREADS = 8  # per client process, to open the held transactions
SAMPLE_INTERVAL_S = 0.25


# --- the client process -----------------------------------------------------------------------


@dataclass
class ThreadReport:
    """What one producer thread did; transaction numbers are per thread, from 0."""

    committed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)  # refused or aborted: must be absent
    unknown: list[int] = field(default_factory=list)  # commit outcome unknown: all or nothing
    commit_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def record_value(worker: int, thread: int, number: int, index: int, size: int) -> bytes:
    text = f"load:{worker}:{thread}:{number}:{index}:".encode()
    return text + b"x" * max(0, size - len(text))


def run_producer(
    address: str,
    worker: int,
    thread: int,
    deadline_s: float,
    records: int,
    record_bytes: int,
    partitions: int,
) -> ThreadReport:
    from twinlog.engine.base.errors import RequestTimedOutError, TwinlogError
    from twinlog.rpc.client import Producer

    report = ThreadReport()
    chooser = random.Random(worker * 1000 + thread)
    with Producer(
        address, transactional_id=f"load-{worker}-{thread}", linger_ms=2, compression="none"
    ) as producer:
        producer.init_transactions()
        number = 0
        while time.monotonic() < deadline_s:
            try:
                producer.begin_transaction()
                for index in range(records):
                    producer.send(
                        TOPIC,
                        record_value(worker, thread, number, index, record_bytes),
                        partition=chooser.randrange(partitions),
                    )
                started_s = time.monotonic()
                producer.commit_transaction()
                report.commit_s.append(time.monotonic() - started_s)
                report.committed.append(number)
            except RequestTimedOutError as error:
                report.unknown.append(number)
                report.errors.append(f"{type(error).__name__}: {error}")
                break  # the producer's state is unknown too: stop this thread
            except TwinlogError as error:
                report.failed.append(number)
                report.errors.append(f"{type(error).__name__}: {error}")
                try:
                    producer.abort_transaction()
                except TwinlogError:
                    break
            number += 1
    return report


def hold_transactions(
    address: str, worker: int, count: int, partitions: int
) -> tuple[Any, list[tuple[int, int, int]]]:
    """Begin ``count`` transactions (one idle producer each, one batch each); keep them open."""
    from twinlog.engine.records.batch_builder import build_batch
    from twinlog.rpc.client.remote import RemoteBroker

    broker = RemoteBroker(address)

    def hold(index: int) -> tuple[int, int, int]:
        identity = broker.init_producer(f"held-{worker}-{index}", HELD_TIMEOUT_MS)
        owner = (identity.producer_id, identity.producer_generation)
        transaction_id = broker.begin_transaction(*owner)
        batch = build_batch(
            [f"held:{worker}:{index}".encode()],
            compression="none",
            producer_id=owner[0],
            producer_generation=owner[1],
            base_sequence=0,
            transactional=True,
        )
        broker.produce(TOPIC, index % partitions, batch, transaction_id=transaction_id)
        return transaction_id, *owner

    with ThreadPoolExecutor(HOLDER_THREADS) as pool:
        held = list(pool.map(hold, range(count)))
    return broker, held


def release_transactions(broker: Any, held: list[tuple[int, int, int]]) -> None:
    with ThreadPoolExecutor(HOLDER_THREADS) as pool:
        list(pool.map(lambda item: broker.abort_transaction(*item), held))
    broker.close()


def worker_main(args: argparse.Namespace) -> int:
    """One client process: holds its share of transactions, then runs its producer threads."""
    broker, held = hold_transactions(args.server, args.worker, args.hold, args.partitions)
    print(f"HELD {len(held)}", flush=True)
    line = sys.stdin.readline().split()  # "go SECONDS" from the runner
    deadline_s = time.monotonic() + float(line[1])
    with ThreadPoolExecutor(max(1, args.threads)) as pool:
        futures = [
            pool.submit(
                run_producer,
                args.server,
                args.worker,
                thread,
                deadline_s,
                args.records,
                args.record_bytes,
                args.partitions,
            )
            for thread in range(args.threads)
        ]
        reports = [future.result() for future in futures]
    print("PRODUCED", flush=True)
    sys.stdin.readline()  # "release": the runner has sampled what it wanted with them open
    release_transactions(broker, held)
    result = {"worker": args.worker, "threads": [asdict(r) for r in reports], "held": len(held)}
    print("result " + json.dumps(result), flush=True)
    return 0


# --- the runner ---------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident set of a process, from /proc (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Sampler:
    """Samples the server's RSS in the background; ``max_bytes`` is the highest seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(SAMPLE_INTERVAL_S):
            self.samples.append((time.monotonic(), rss_bytes(self.pid)))

    def now(self) -> int:
        value = rss_bytes(self.pid)
        self.samples.append((time.monotonic(), value))
        return value

    def max_between(self, start_s: float, end_s: float) -> int:
        return max((v for t, v in self.samples if start_s <= t <= end_s), default=0)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


class Fetcher:
    """Reads every partition forward with plain fetches and times each round trip."""

    def __init__(self, address: str, partitions: int) -> None:
        from twinlog.rpc.client.remote import RemoteBroker

        self.broker = RemoteBroker(address)
        self.partitions = partitions
        self.positions = [0] * partitions
        self.latencies_s: list[float] = []
        self.errors: list[str] = []
        self.bytes_read = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fetcher", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from twinlog.engine.base.errors import TwinlogError
        from twinlog.engine.records.batch_format import read_header

        partition = 0
        while not self.stop.is_set():
            started_s = time.monotonic()
            try:
                result = self.broker.fetch(
                    TOPIC, partition, self.positions[partition], max_bytes=MEBIBYTE, max_wait_ms=0
                )
            except TwinlogError as error:
                self.errors.append(f"{type(error).__name__}: {error}")
                time.sleep(0.05)
                continue
            self.latencies_s.append(time.monotonic() - started_s)
            records = result.records
            position = 0
            while position < len(records):
                header = read_header(records, position)
                self.positions[partition] = header.next_offset
                position += header.size_bytes
            self.bytes_read += len(records)
            if not records:
                time.sleep(0.005)  # caught up: do not spin
            partition = (partition + 1) % self.partitions

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.broker.close()


def read_topic(address: str, partitions: int) -> Counter[bytes]:
    """How often each record value is in the topic's data logs."""
    from twinlog.engine.records.batch_reader import iter_batches
    from twinlog.rpc.client.remote import RemoteBroker

    found: Counter[bytes] = Counter()
    with RemoteBroker(address) as broker:
        for partition in range(partitions):
            offset = 0
            end = broker.list_offset(TOPIC, partition, "latest")
            while offset < end:
                fetched = broker.fetch(TOPIC, partition, offset, max_bytes=8 * MEBIBYTE)
                for batch in iter_batches(fetched.records):
                    for record in batch.records():
                        if record.offset >= offset:
                            found[record.value or b""] += 1
                    offset = batch.header.next_offset
    return found


def verify(
    found: Counter[bytes], reports: list[dict[str, Any]], records: int, record_bytes: int
) -> list[str]:
    """What is wrong with the data (empty: nothing). See the module docstring."""
    problems: list[str] = []
    expected: set[bytes] = set()
    for result in reports:
        worker = result["worker"]
        for thread, report in enumerate(result["threads"]):

            def values(number: int, worker: int = worker, thread: int = thread) -> list[bytes]:
                return [
                    record_value(worker, thread, number, i, record_bytes) for i in range(records)
                ]

            for number in report["committed"]:
                batch_values = values(number)
                expected.update(batch_values)
                missing = [v for v in batch_values if found[v] != 1]
                if missing:
                    problems.append(
                        f"committed transaction {worker}/{thread}/{number}: {len(missing)} "
                        f"records not there exactly once (e.g. {missing[0][:40]!r} x "
                        f"{found[missing[0]]})"
                    )
            for number in report["failed"]:
                present = [v for v in values(number) if found[v]]
                if present:
                    problems.append(
                        f"aborted transaction {worker}/{thread}/{number}: {len(present)} records "
                        "are readable"
                    )
            for number in report["unknown"]:
                counts = {found[v] for v in values(number)}
                expected.update(v for v in values(number) if found[v])
                if counts not in ({0}, {1}):
                    problems.append(
                        f"transaction {worker}/{thread}/{number} (outcome unknown) is partly "
                        f"there: counts {sorted(counts)}"
                    )
    held = [v for v in found if v.startswith(b"held:")]
    if held:
        problems.append(f"{len(held)} records of held (then aborted) transactions are readable")
    strangers = [v for v in found if v not in expected and not v.startswith(b"held:")]
    if strangers:
        problems.append(f"{len(strangers)} records no committed transaction wrote are readable")
    return problems


@dataclass(frozen=True)
class Settings:
    seconds: float
    producers: int
    open_transactions: int
    client_processes: int
    partitions: int
    records_per_transaction: int
    record_bytes: int
    server_config: tuple[str, ...]


def spawn_workers(address: str, settings: Settings) -> list[subprocess.Popen[str]]:
    processes = []
    count = settings.client_processes
    for worker in range(count):
        threads = settings.producers // count + (1 if worker < settings.producers % count else 0)
        hold = settings.open_transactions // count + (
            1 if worker < settings.open_transactions % count else 0
        )
        command = [
            sys.executable, "-m", "bench.load", "--worker", str(worker), "--server", address,
            "--threads", str(threads), "--hold", str(hold), "--partitions", str(settings.partitions),
            "--records", str(settings.records_per_transaction),
            "--record-bytes", str(settings.record_bytes),
        ]  # fmt: skip
        processes.append(
            subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env=environment(),
            )
        )
    return processes


def expect(process: subprocess.Popen[str], prefix: str) -> str:
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith(prefix):
            return line.rstrip("\n")
    raise RuntimeError(f"a client process ended before saying {prefix!r} (status {process.wait()})")


def tell(processes: list[subprocess.Popen[str]], line: str) -> None:
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(line + "\n")
        process.stdin.flush()


def run(settings: Settings, directory: Path, say: Any) -> dict[str, Any]:
    from twinlog.rpc.client import Admin
    from twinlog.rpc.client.remote import RemoteBroker

    server, address, log_path = start_server(directory, settings.server_config)
    sampler = Sampler(server.pid)
    processes: list[subprocess.Popen[str]] = []
    try:
        with Admin(address) as admin:
            admin.create_topic(TOPIC, partitions=settings.partitions)
        time.sleep(0.5)
        rss_idle = sampler.now()
        say(f"holding {settings.open_transactions} transactions open ...")
        started_s = time.monotonic()
        processes = spawn_workers(address, settings)
        held = sum(int(expect(p, "HELD ").split()[1]) for p in processes)
        hold_s = time.monotonic() - started_s
        with RemoteBroker(address) as remote:
            open_before = len(remote.list_transactions())
        rss_holding = sampler.now()
        say(f"running {settings.producers} producers for {settings.seconds:g} s ...")
        fetcher = Fetcher(address, settings.partitions)
        load_started_s = time.monotonic()
        tell(processes, f"go {settings.seconds}")
        time.sleep(settings.seconds / 2)
        with RemoteBroker(address) as remote:
            open_midway = len(remote.list_transactions())
        for process in processes:
            expect(process, "PRODUCED")
        load_s = time.monotonic() - load_started_s
        fetcher.close()
        rss_end = sampler.now()
        load_ended_s = time.monotonic()
        rss_max = sampler.max_between(load_started_s, load_ended_s)
        quarter_s = (load_ended_s - load_started_s) / 4
        rss_quarters = [  # the highest in each quarter of the run: flat means bounded
            sampler.max_between(
                load_started_s + q * quarter_s, load_started_s + (q + 1) * quarter_s
            )
            for q in range(4)
        ]
        tell(processes, "release")
        reports = [json.loads(expect(p, "result ")[len("result ") :]) for p in processes]
        for process in processes:
            if process.wait(timeout=60) != 0:
                raise RuntimeError(f"a client process failed (status {process.returncode})")
        with RemoteBroker(address) as remote:  # the held transactions' aborts complete
            deadline_s = time.monotonic() + 60
            while remote.list_transactions() and time.monotonic() < deadline_s:
                time.sleep(0.1)
            open_after = len(remote.list_transactions())
            answered_after = remote.list_topics() == [TOPIC]
        rss_released = sampler.now()
        say("checking the data ...")
        found = read_topic(address, settings.partitions)
        problems = verify(found, reports, settings.records_per_transaction, settings.record_bytes)
        if open_after:
            problems.append(f"{open_after} transactions still open a minute after the run")
        if not answered_after:
            problems.append("the server did not answer list_topics correctly after the run")
        if fetcher.errors:
            problems.append(f"{len(fetcher.errors)} fetches failed, e.g. {fetcher.errors[0]}")
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()
        sampler.close()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    threads = [t for r in reports for t in r["threads"]]
    commit_s = [s for t in threads for s in t["commit_s"]]
    committed = sum(len(t["committed"]) for t in threads)
    errors = [e for t in threads for e in t["errors"]]
    return {
        "settings": asdict(settings),
        "load_s": load_s,
        "hold_s": hold_s,
        "held_transactions": held,
        "open_transactions": {"before": open_before, "midway": open_midway, "after": open_after},
        "committed_transactions": committed,
        "failed_transactions": sum(len(t["failed"]) for t in threads),
        "unknown_transactions": sum(len(t["unknown"]) for t in threads),
        "committed_records": committed * settings.records_per_transaction,
        "transactions_per_s": committed / load_s,
        "records_per_s": committed * settings.records_per_transaction / load_s,
        "commit_p50_ms": percentile(commit_s, 0.5) * 1000,
        "commit_p99_ms": percentile(commit_s, 0.99) * 1000,
        "fetches": len(fetcher.latencies_s),
        "fetch_p50_ms": percentile(fetcher.latencies_s, 0.5) * 1000,
        "fetch_p99_ms": percentile(fetcher.latencies_s, 0.99) * 1000,
        "fetch_max_ms": max(fetcher.latencies_s, default=0.0) * 1000,
        "fetched_mib": fetcher.bytes_read / MEBIBYTE,
        "rss_mib": {
            "idle": rss_idle / MEBIBYTE,
            "holding": rss_holding / MEBIBYTE,
            "max": rss_max / MEBIBYTE,
            "end": rss_end / MEBIBYTE,
            "released": rss_released / MEBIBYTE,
            "quarters": [value / MEBIBYTE for value in rss_quarters],
        },
        "records_read": sum(found.values()),
        "producer_errors": errors[:10],
        "problems": problems,
        "server_log": str(log_path),
    }


def print_table(results: dict[str, Any]) -> None:
    settings = results["settings"]
    rss = results["rss_mib"]
    opened = results["open_transactions"]
    rows = [
        ("run", f"{results['load_s']:.1f} s, {settings['producers']} producers in "
                f"{settings['client_processes']} processes, {settings['partitions']} partitions"),
        ("held open", f"{results['held_transactions']:,} transactions (opened in "
                      f"{results['hold_s']:.1f} s)"),
        ("open transactions", f"{opened['before']:,} before, {opened['midway']:,} midway, "
                              f"{opened['after']:,} after"),
        ("committed", f"{results['committed_transactions']:,} transactions "
                      f"({results['transactions_per_s']:,.1f}/s), "
                      f"{results['committed_records']:,} records ({results['records_per_s']:,.0f}/s)"),
        ("failed / unknown", f"{results['failed_transactions']} / "
                             f"{results['unknown_transactions']}"),
        ("commit round trip", f"p50 {results['commit_p50_ms']:.1f} ms   "
                              f"p99 {results['commit_p99_ms']:.1f} ms"),
        ("fetch round trip", f"p50 {results['fetch_p50_ms']:.1f} ms   p99 "
                             f"{results['fetch_p99_ms']:.1f} ms   max {results['fetch_max_ms']:.1f} ms"
                             f"   ({results['fetches']:,} fetches, {results['fetched_mib']:.1f} MiB)"),
        ("server RSS", f"idle {rss['idle']:.0f} MiB, holding {rss['holding']:.0f} MiB, "
                       f"max {rss['max']:.0f} MiB, end {rss['end']:.0f} MiB, "
                       f"released {rss['released']:.0f} MiB"),
        ("RSS per quarter", "  ".join(f"{value:.0f}" for value in rss["quarters"])
                            + " MiB (highest in each quarter of the run)"),
        ("data check", "every committed record once, nothing aborted"
                       if not results["problems"] else "; ".join(results["problems"])),
    ]  # fmt: skip
    print()
    for name, value in rows:
        print(f"{name:<20}{value}")


EXAMPLE = """
example:
  python -m bench.load --seconds 60
  python -m bench.load --seconds 10 --producers 16 --open-transactions 200 --json -
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load",
        description=__doc__,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the run (60)")
    parser.add_argument("--producers", type=int, default=64, help="producer threads (64)")
    parser.add_argument(
        "--open-transactions", type=int, default=1000,
        help="transactions held open for the whole run (1000)",
    )  # fmt: skip
    parser.add_argument(
        "--client-processes", type=int, default=4, help="client processes sharing the work (4)"
    )
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the topic (8)")
    parser.add_argument(
        "--records-per-transaction", type=int, default=20, help="records per transaction (20)"
    )
    parser.add_argument("--record-bytes", type=int, default=200, help="bytes per record (200)")
    parser.add_argument(
        "--server-config", action="append", default=[], metavar="KEY=VALUE",
        help="passed to twinlog serve --config",
    )  # fmt: skip
    add_output_arguments(parser, "no progress lines on stderr")
    # The client processes run this module too:
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--hold", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--records", type=int, default=20, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        return worker_main(args)
    if min(args.producers, args.client_processes, args.partitions) < 1 or args.seconds <= 0:
        parser.error("--seconds, --producers, --client-processes and --partitions must be > 0")
    settings = Settings(
        seconds=args.seconds,
        producers=args.producers,
        open_transactions=args.open_transactions,
        client_processes=min(args.client_processes, args.producers),
        partitions=args.partitions,
        records_per_transaction=args.records_per_transaction,
        record_bytes=args.record_bytes,
        server_config=tuple(args.server_config),
    )

    def say(text: str) -> None:
        if not args.quiet:
            print(f"load: {text}", file=sys.stderr, flush=True)

    with work_directory(args.work_dir, "twinlog-load-") as directory:
        results = run(settings, directory, say)
    print_table(results)
    write_json(results, args.json)
    return 1 if results["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
