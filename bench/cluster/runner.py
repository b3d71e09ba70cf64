"""``python -m bench.cluster``: the cluster figures of CLUSTER.md §5, in one run.

Starts, on loopback in a temporary directory, a ZooKeeper (PySpark's jars), a
single-node ``twinlog serve`` (the baseline), then three ``twinlog serve --broker-id N
--zookeeper ...`` brokers, and measures with the same client against both:

    throughput    plain and transactional records/s, RF 3 acks=all vs single node
    latency       produce p50/p99 (one record, acks=all) and commit p50/p99
    failover      SIGKILL of a leader -> first acknowledged produce, in four phases;
                  SIGTERM (controlled shutdown) of a leader -> first acknowledged produce
    coordinator   SIGKILL of a transaction coordinator's broker -> first committed
      failover    transaction, in four phases, with 0 and 1,000 transactions left open
                  there (how many are still open after it)
    catch-up      MiB/s of a restarted follower copying what it missed
    fsync         plain throughput and produce latency with replica_fsync off vs on

The ZooKeeper session timeout is the tests' 4 s (Kafka's default is 18 s); it
dominates the SIGKILL failovers. Every process runs on this machine: compare ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from bench.cluster.catch_up import follower_catch_up
from bench.cluster.cluster import BenchCluster
from bench.cluster.coordinator_failover import measure_coordinator_failovers
from bench.cluster.failover import graceful_failover, sigkill_failover
from bench.cluster.node_figures import measure_plain, measure_transactional
from bench.cluster.report import add_ratios, machine_note, print_report
from bench.cluster.server_process import ServerProcess
from bench.cluster.settings import TINY, BenchSettings
from bench.e2e.runner import add_output_arguments, work_directory, write_json
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

FAILOVER_TOPIC = "bench-failover"
FAILOVER_PARTITIONS = 3  # so that one of them is led by a broker that is not the controller
CATCH_UP_TOPIC = "bench-catch-up"


class Announcer:
    """One line per phase on stderr, with the time since the start."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started_s = time.monotonic()
        self.part = ""

    def __call__(self, phase: str) -> None:
        if not self.quiet:
            elapsed_s = time.monotonic() - self.started_s
            print(f"[{elapsed_s:6.1f} s] {self.part}: {phase}", file=sys.stderr, flush=True)


def measure_single_node(root: Path, settings: BenchSettings, announce: Announcer) -> dict[str, Any]:
    announce.part = "single node"
    announce("starting twinlog serve")
    server = ServerProcess("single-node", root / "single-node", [])
    try:
        server.start()
        created: set[str] = set()

        def address_of(topic: str) -> str:
            if topic not in created:
                with RemoteBroker(server.address, ConnectionOptions()) as admin:
                    admin.create_topic(topic, 1)
                created.add(topic)
            return server.address

        results = measure_plain(address_of, settings, announce)
        results["transactional"] = measure_transactional(address_of, settings, announce)
        return results
    finally:
        server.kill_group()


def _leader_address_of(cluster: BenchCluster) -> Any:
    def address_of(topic: str) -> str:
        states = cluster.create_topic(topic, 1)
        return cluster.brokers[states[0].leader].address

    return address_of


def _bootstrap_of(cluster: BenchCluster) -> Any:
    """The partition's leader first, then the other brokers: a cluster client's bootstrap
    list, so a transactional producer follows its coordinator (the leader of
    ``__txn_journal-N``, maybe another broker) as a user's would."""

    def address_of(topic: str) -> str:
        leader = cluster.brokers[cluster.create_topic(topic, 1)[0].leader].address
        others = [b.address for b in cluster.brokers.values() if b.address != leader]
        return ",".join([leader, *others])

    return address_of


def measure_cluster(
    root: Path, connect: str, settings: BenchSettings, announce: Announcer
) -> dict[str, Any]:
    announce.part = "cluster RF 3"
    announce("starting three brokers")
    cluster = BenchCluster(root / "cluster", connect, settings.session_timeout_ms)
    try:
        cluster.start()
        # The phases that restart brokers first: the Producer's phases then measure a
        # cluster whose every broker is up and in every ISR, as the restarts leave it.
        results: dict[str, Any] = {"failover_sigkill": [], "failover_sigterm": []}
        cluster.create_topic(FAILOVER_TOPIC, FAILOVER_PARTITIONS)
        for round_number in range(1, settings.failover_rounds + 1):
            announce(f"failover after SIGKILL, round {round_number}")
            results["failover_sigkill"].append(
                sigkill_failover(cluster, FAILOVER_TOPIC, FAILOVER_PARTITIONS, settings)
            )
            announce(f"failover after SIGTERM, round {round_number}")
            results["failover_sigterm"].append(
                graceful_failover(cluster, FAILOVER_TOPIC, FAILOVER_PARTITIONS, settings)
            )
        results["coordinator_failover"] = measure_coordinator_failovers(cluster, settings, announce)
        announce(f"follower catch-up of {settings.catch_up_mib} MiB")
        results["catch_up"] = follower_catch_up(cluster, CATCH_UP_TOPIC, settings)
        address_of = _leader_address_of(cluster)
        results.update(measure_plain(address_of, settings, announce))
        results["transactional"] = measure_transactional(_bootstrap_of(cluster), settings, announce)
        return results
    finally:
        cluster.close()


def measure_without_replica_fsync(
    root: Path, connect: str, settings: BenchSettings, announce: Announcer
) -> dict[str, Any]:
    announce.part = "cluster RF 3, replica_fsync=false"
    announce("starting three brokers")
    cluster = BenchCluster(
        root / "cluster-no-fsync",
        connect,
        settings.session_timeout_ms,
        ["replica_fsync=false"],
    )
    try:
        cluster.start()
        # Plain throughput and latency only: what a follower's fsync slows is acks=all.
        return measure_plain(_leader_address_of(cluster), settings, announce)
    finally:
        cluster.close()


def run(settings: BenchSettings, root: Path, quiet: bool = False) -> dict[str, Any]:
    announce = Announcer(quiet)
    results: dict[str, Any] = {
        "settings": dataclasses.asdict(settings),
        "machine": machine_note(),
    }
    results["single_node"] = measure_single_node(root, settings, announce)
    announce.part = "zookeeper"
    announce("starting")
    with LocalZooKeeper(root / "zookeeper", tick_time_ms=settings.zookeeper_tick_ms) as zookeeper:
        connect = f"{zookeeper.connect_string}/bench/{uuid.uuid4().hex[:8]}"
        results["cluster"] = measure_cluster(root, connect, settings, announce)
        if settings.compare_fsync:
            connect = f"{zookeeper.connect_string}/bench/{uuid.uuid4().hex[:8]}"
            results["no_replica_fsync"] = measure_without_replica_fsync(
                root, connect, settings, announce
            )
    results["machine"]["load_average_at_end"] = os.getloadavg()
    results["elapsed_s"] = time.monotonic() - announce.started_s
    add_ratios(results)
    return results


@contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every ``finally`` kills what it started."""

    def leave(signal_number: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signal_number)

    previous = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


EXAMPLE = """
example:
  python -m bench.cluster                        # 60-90 s on two cores
  python -m bench.cluster --json cluster.json
  python -m bench.cluster --tiny --no-fsync-compare   # a quick check that it all works
  python -m bench.cluster --catch-up-mib 100 --failover-rounds 3
  python -m bench.cluster --open-transactions 0,1000,10000
"""


def parse_settings(args: argparse.Namespace) -> BenchSettings:
    base = TINY if args.tiny else BenchSettings()
    changes: dict[str, Any] = {"compare_fsync": base.compare_fsync and not args.no_fsync_compare}
    for name in (
        "plain_records",
        "transactions",
        "latency_samples",
        "catch_up_mib",
        "failover_rounds",
        "session_timeout_ms",
    ):
        value = getattr(args, name)
        if value is not None:
            if value <= 0:
                raise SystemExit(f"--{name.replace('_', '-')} must be > 0")
            changes[name] = value
    if args.open_transactions is not None:
        changes["open_transactions"] = parse_counts("--open-transactions", args.open_transactions)
    return dataclasses.replace(base, **changes)


def parse_counts(option: str, text: str) -> tuple[int, ...]:
    """``"0,1000,10000"`` -> (0, 1000, 10000): one or more counts, each >= 0."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise SystemExit(
            f"{option} takes counts separated by commas, like 0,1000: {text!r}"
        ) from None
    if any(count < 0 for count in counts):
        raise SystemExit(f"{option}: counts must be >= 0: {text!r}")
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cluster",
        description=__doc__,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = BenchSettings()
    parser.add_argument(
        "--plain-records",
        type=int,
        dest="plain_records",
        help=f"1 KiB records of the plain throughput run ({defaults.plain_records})",
    )
    parser.add_argument(
        "--transactions",
        type=int,
        help=f"transactions of {defaults.records_per_transaction} records "
        f"({defaults.transactions})",
    )
    parser.add_argument(
        "--latency-samples",
        type=int,
        dest="latency_samples",
        help=f"produce round trips timed ({defaults.latency_samples})",
    )
    parser.add_argument(
        "--catch-up-mib",
        type=int,
        dest="catch_up_mib",
        help=f"MiB a stopped follower misses ({defaults.catch_up_mib})",
    )
    parser.add_argument(
        "--failover-rounds",
        type=int,
        dest="failover_rounds",
        help=f"SIGKILL and SIGTERM failovers each ({defaults.failover_rounds})",
    )
    parser.add_argument(
        "--open-transactions",
        dest="open_transactions",
        metavar="K,K,...",
        help="transactions left open at the coordinator killed, one coordinator failover "
        f"per count ({','.join(map(str, defaults.open_transactions))}; --tiny: "
        f"{','.join(map(str, TINY.open_transactions))})",
    )
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        dest="session_timeout_ms",
        help=f"brokers' ZooKeeper session timeout ({defaults.session_timeout_ms})",
    )
    parser.add_argument(
        "--no-fsync-compare",
        action="store_true",
        help="skip the second cluster with replica_fsync=false",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="tiny sizes: checks that every phase works, figures meaningless",
    )
    add_output_arguments(parser, "no phase lines on stderr")
    args = parser.parse_args(argv)
    settings = parse_settings(args)
    with sigterm_as_exit(), work_directory(args.work_dir, "twinlog-bench-cluster-") as root:
        results = run(settings, root, args.quiet)
    print_report(results)
    write_json(results, args.json)
    return 0
