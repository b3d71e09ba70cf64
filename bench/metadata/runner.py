"""``python -m bench.metadata``: how a ZooKeeper-based twinlog cluster's metadata work
grows with its partitions.

Starts, on loopback in a temporary directory, a ZooKeeper (PySpark's jars) and three
brokers (``bench.cluster``'s), creates ``--partitions`` partitions (topics of
``--partitions-per-topic``, ``--replication-factor``, 3 by default), and measures,
each with the ZooKeeper requests and writes it took (``mntr``):

    create           every partition with a leader and a full ISR
    memory           each broker's resident memory per partition (after - before)
    first metadata   a new client's first answer (Metadata of every topic), and the
                     answer's size
    controller       SIGKILL of the controller's broker -> a new controller elected,
      failover       and every partition it led with a new leader (its session's
                     expiry included: the 4 s the tests use); with replication
                     factor 1, every partition it led marked offline instead
    broker restart   the killed broker started again -> serving, then -> every
                     partition's ISR full again

Every process runs on this machine (two cores): the figures are for comparing sizes
(run it with 1,000 and 10,000), not absolutes. Replication factor 1 measures the
metadata work alone: no follower fetches, whose cost also grows with the partitions.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.cluster.cluster import BenchCluster
from bench.cluster.report import machine_note
from bench.cluster.runner import sigterm_as_exit
from bench.cluster.settings import BenchSettings
from bench.cluster.waiting import wait_for
from bench.e2e.runner import add_output_arguments, work_directory, write_json
from bench.metadata.probes import ZooKeeperCounts, open_files, resident_bytes, zookeeper_counts
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.partition_state import read_topic_partition_states
from twinlog.rpc.cli.arguments import positive_int
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import ConnectionOptions

PHASE_TIMEOUT_S = 1800.0  # 10,000 partitions on two cores take minutes to create
ADMIN_TIMEOUT_MS = 600_000
EXAMPLE = """
example:
  python -m bench.metadata --partitions 1000
  python -m bench.metadata --partitions 10000 --json metadata-10k.json   # 10-20 min
  python -m bench.metadata --partitions 10000 --replication-factor 1   # metadata alone
  python -m bench.metadata --tiny                # 60 partitions: a check, not figures
"""


class Measured:
    """Times and ZooKeeper deltas of the phases, in one dict. ``own_requests`` counts the
    benchmark's own reads (its polls of the partition states), taken out of the deltas:
    what is reported is the brokers' and the clients' work."""

    def __init__(self, zookeeper: LocalZooKeeper, quiet: bool) -> None:
        self.zookeeper = zookeeper
        self.quiet = quiet
        self.started_s = time.monotonic()
        self.results: dict[str, Any] = {}
        self.own_requests = 0

    def counts(self) -> ZooKeeperCounts:
        host, port = self.zookeeper.connect_string.rsplit(":", 1)
        return zookeeper_counts(host, int(port))

    def say(self, what: str) -> None:
        if not self.quiet:
            elapsed_s = time.monotonic() - self.started_s
            print(f"[{elapsed_s:7.1f} s] {what}", file=sys.stderr, flush=True)

    def phase(self, name: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        self.say(name)
        self.own_requests = POLLS[0]
        own_before = self.own_requests
        before, started_s = self.counts(), time.monotonic()
        figures = run()
        figures.setdefault("seconds", time.monotonic() - started_s)
        counts = self.counts().minus(before)
        self.own_requests = POLLS[0]
        own = self.own_requests - own_before + 2  # and the two counters' own connections
        counts["requests"] -= own
        counts["reads_and_pings"] -= own
        counts["benchmark_polls_subtracted"] = own
        figures["zookeeper"] = counts
        self.results[name] = figures
        return figures


POLLS = [0]  # the benchmark's own ZooKeeper reads (``Measured.own_requests``)


def _all_states(cluster: BenchCluster, topics: list[str]) -> dict[tuple[str, int], Any]:
    states = {
        (topic, partition): state
        for topic in topics
        for partition, state in read_topic_partition_states(cluster.zookeeper, topic).items()
    }
    POLLS[0] += len(topics) + len(states)  # a listing per topic, a read per state
    return states


def _every_full(cluster: BenchCluster, topics: list[str], partitions: int) -> bool:
    states = _all_states(cluster, topics)
    return len(states) == partitions and all(
        s.leader > 0 and len(s.isr) == len(s.replicas) for s in states.values()
    )


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    settings = BenchSettings()
    count, per_topic = args.partitions, min(args.partitions_per_topic, args.partitions)
    topics = [f"meta-{n:04d}" for n in range((count + per_topic - 1) // per_topic)]
    with LocalZooKeeper(root / "zookeeper", tick_time_ms=settings.zookeeper_tick_ms) as zookeeper:
        measured = Measured(zookeeper, args.quiet)
        results: dict[str, Any] = {
            "machine": machine_note(),
            "partitions": count,
            "replication_factor": args.replication_factor,
        }
        connect = f"{zookeeper.connect_string}/bench/{uuid.uuid4().hex[:8]}"
        cluster = BenchCluster(root / "cluster", connect, settings.session_timeout_ms)
        try:
            measured.say("starting three brokers")
            cluster.start()
            cluster.wait_every_full_isr()
            memory_before = {b: resident_bytes(p.process.pid) for b, p in _running(cluster)}
            files_before = {b: open_files(p.process.pid) for b, p in _running(cluster)}

            def create() -> dict[str, Any]:
                with cluster.admin() as admin:
                    left = count
                    for topic in topics:
                        size = min(per_topic, left)
                        admin.create_topic(
                            topic, size, {"replication.factor": str(args.replication_factor)}
                        )
                        left -= size
                wait_for(
                    f"{count} partitions with full ISRs",
                    lambda: _every_full(cluster, topics, count),
                    PHASE_TIMEOUT_S,
                    interval_s=1.0,
                )
                return {}

            measured.phase("create", create)
            time.sleep(2.0)  # the brokers settle (their roles' callbacks, first fetches)
            memory_after = {b: resident_bytes(p.process.pid) for b, p in _running(cluster)}
            files = {b: open_files(p.process.pid) for b, p in _running(cluster)}
            results["open_files"] = files
            results["open_files_per_partition"] = {
                b: (files[b] - files_before[b]) / count for b in files
            }
            results["memory_per_partition_bytes"] = {
                b: (memory_after[b] - memory_before[b]) / count for b in memory_after
            }
            results["memory_bytes"] = memory_after
            bootstrap = ",".join(p.address for p in cluster.brokers.values())

            def first_metadata() -> dict[str, Any]:
                options = ConnectionOptions(request_timeout_ms=ADMIN_TIMEOUT_MS)
                started_s = time.monotonic()
                with ClusterBroker(bootstrap, options) as client:
                    metadata = client.cluster_metadata()
                elapsed_s = time.monotonic() - started_s
                seen = sum(len(t.partitions) for t in metadata.topics)
                return {"seconds": elapsed_s, "partitions_in_answer": seen}

            measured.phase("first_metadata", first_metadata)
            victim = cluster.controller_id()
            led = [key for key, s in _all_states(cluster, topics).items() if s.leader == victim]
            results["controller_led_partitions"] = len(led)

            def controller_failover() -> dict[str, Any]:
                killed_s = time.monotonic()
                cluster.brokers[victim].signal(signal.SIGKILL)
                new_controller = wait_for(
                    "a new controller",
                    lambda: (c := cluster.controller_id()) not in (victim, -1) and c,
                    PHASE_TIMEOUT_S,
                    interval_s=0.05,
                )
                elected_s = time.monotonic()

                def moved() -> bool:
                    states = _all_states(cluster, topics)
                    return all(states[key].leader not in (victim, -1) for key in led)

                def offline() -> bool:  # replication factor 1: no other replica to lead
                    states = _all_states(cluster, topics)
                    return all(states[key].leader == -1 for key in led)

                if args.replication_factor > 1:
                    wait_for("every partition it led led again", moved, PHASE_TIMEOUT_S, 0.2)
                else:
                    wait_for("every partition it led offline", offline, PHASE_TIMEOUT_S, 0.2)
                return {
                    "new_controller": new_controller,
                    "to_new_controller_s": elected_s - killed_s,
                    "seconds": time.monotonic() - killed_s,
                }

            measured.phase("controller_failover", controller_failover)

            def broker_restart() -> dict[str, Any]:
                started_s = time.monotonic()
                cluster.brokers[victim].start()
                serving_s = time.monotonic()
                wait_for(
                    "every ISR full again",
                    lambda: _every_full(cluster, topics, count),
                    PHASE_TIMEOUT_S,
                    interval_s=1.0,
                )
                return {
                    "to_serving_s": serving_s - started_s,
                    "seconds": time.monotonic() - started_s,
                }

            measured.phase("broker_restart", broker_restart)
            results["znodes"] = measured.counts().znodes
            data, _stat = cluster.zookeeper.wait(
                cluster.zookeeper.client.get_async(znodes.partition_state_path(topics[0], 0))
            )
            results["state_znode_bytes"] = len(data)
        finally:
            cluster.close()
        results.update(measured.results)
    results["machine"]["load_average_at_end"] = os.getloadavg()
    return results


def _running(cluster: BenchCluster) -> list[tuple[int, Any]]:
    return [(b, p) for b, p in cluster.brokers.items() if p.running and p.process is not None]


def print_report(results: dict[str, Any]) -> None:
    n = results["partitions"]

    def zk(phase: str) -> str:
        counts = results[phase]["zookeeper"]
        return f"ZooKeeper: {counts['requests']:,} requests, {counts['writes']:,} writes"

    memory = results["memory_per_partition_bytes"]
    factor = results["replication_factor"]
    print(f"| {n:,} partitions, replication factor {factor}, 3 brokers | value |")
    print("| --- | --- |")
    print(f"| create, to full ISRs | {results['create']['seconds']:.1f} s ({zk('create')}) |")
    print(
        "| broker memory per partition | "
        + ", ".join(f"broker {b}: {v / 1024:.1f} KiB" for b, v in sorted(memory.items()))
        + " |"
    )
    per_file = results["open_files_per_partition"]
    print(
        "| open files per partition | "
        + ", ".join(f"broker {b}: {v:.1f}" for b, v in sorted(per_file.items()))
        + " |"
    )
    first = results["first_metadata"]
    print(
        f"| a new client's first metadata answer | {first['seconds'] * 1000:.0f} ms "
        f"({first['partitions_in_answer']:,} partitions; {zk('first_metadata')}) |"
    )
    failover = results["controller_failover"]
    print(
        f"| controller failover (SIGKILL, 4 s session) | new controller after "
        f"{failover['to_new_controller_s']:.1f} s; its {results['controller_led_partitions']:,} "
        f"partitions {'led again' if factor > 1 else 'marked offline'} after "
        f"{failover['seconds']:.1f} s ({zk('controller_failover')}) |"
    )
    restart = results["broker_restart"]
    print(
        f"| that broker's restart | serving after {restart['to_serving_s']:.1f} s; every ISR "
        f"full after {restart['seconds']:.1f} s ({zk('broker_restart')}) |"
    )
    print(
        f"| ZooKeeper | {results['znodes']:,} znodes; a state znode {results['state_znode_bytes']} B |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.metadata",
        description=__doc__,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--partitions", type=positive_int, default=10_000, help="(10000)")
    parser.add_argument("--partitions-per-topic", type=positive_int, default=100, help="(100)")
    parser.add_argument(
        "--replication-factor",
        type=positive_int,
        default=3,
        choices=(1, 2, 3),
        help="(3; 1: the metadata work alone, without follower fetches)",
    )
    parser.add_argument("--tiny", action="store_true", help="60 partitions: a check")
    add_output_arguments(parser, "no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.tiny:
        args.partitions, args.partitions_per_topic = 60, 20
    with sigterm_as_exit(), work_directory(args.work_dir, "twinlog-metadata-") as root:
        results = run(args, root)
    print_report(results)
    write_json(results, args.json)
    return 0
