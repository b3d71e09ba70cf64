"""``python -m bench.elastic``: what moving partitions costs on a three-broker cluster.

Starts, on loopback in a temporary directory, a ZooKeeper (PySpark's jars) and three
``twinlog serve --broker-id N --zookeeper ...`` brokers (``bench.cluster``'s), and
measures:

    catch-up       MiB/s of a new replica copying a one-replica partition of
                   ``--catch-up-mib`` MiB moved to another broker (request -> the move
                   completed: copied, in the ISR, the old copy dropped), without a
                   throttle and with ``--throttle-mib-per-s``
    rebalance      a fourth broker joins a cluster holding ``--rebalance-partitions``
                   partitions (replication factor 2) of ``--rebalance-mib`` MiB each;
                   ``cluster rebalance`` gives it its share: moves, seconds, bytes it
                   received
    election       the write pause a preferred-leader election causes: a three-replica
                   partition written one acknowledged record at a time while its
                   leadership moves to its (new) preferred replica

Every process runs on this machine (two cores here): compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cluster.cluster import BenchCluster
from bench.cluster.report import machine_note
from bench.cluster.runner import sigterm_as_exit
from bench.cluster.settings import MIB, BenchSettings
from bench.e2e.runner import add_output_arguments, work_directory, write_json
from bench.elastic.election_pause import preferred_election_pause
from bench.elastic.moves import reassignment_catch_up, rebalance_with_a_new_broker
from twinlog.rpc.cli.arguments import positive_int
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

NEW_BROKER_ID = 4
EXAMPLE = """
example:
  python -m bench.elastic                         # a minute or two on two cores
  python -m bench.elastic --catch-up-mib 200 --throttle-mib-per-s 20 --json elastic.json
  python -m bench.elastic --tiny                  # every phase, tiny sizes: a check
"""


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    settings = BenchSettings()
    started_s = time.monotonic()

    def say(what: str) -> None:
        if not args.quiet:
            print(f"[{time.monotonic() - started_s:6.1f} s] {what}", file=sys.stderr, flush=True)

    results: dict[str, Any] = {"machine": machine_note()}
    say("starting ZooKeeper and three brokers")
    with LocalZooKeeper(root / "zookeeper", tick_time_ms=settings.zookeeper_tick_ms) as zookeeper:
        connect = f"{zookeeper.connect_string}/bench/{uuid.uuid4().hex[:8]}"
        cluster = BenchCluster(root / "cluster", connect, settings.session_timeout_ms)
        try:
            cluster.start()
            say(f"catch-up of {args.catch_up_mib} MiB, no throttle")
            results["catch_up"] = reassignment_catch_up(
                cluster, "bench-move-free", args.catch_up_mib, 0, settings
            )
            throttle = round(args.throttle_mib_per_s * MIB)
            say(
                f"catch-up of {args.catch_up_mib} MiB, throttled to {args.throttle_mib_per_s} MiB/s"
            )
            results["catch_up_throttled"] = reassignment_catch_up(
                cluster, "bench-move-throttled", args.catch_up_mib, throttle, settings
            )
            say(
                f"rebalance: {args.rebalance_partitions} partitions of {args.rebalance_mib} MiB, "
                f"broker {NEW_BROKER_ID} joins"
            )
            bootstrap = ",".join(b.address for b in cluster.brokers.values())
            say("preferred-leader election under acknowledged writes")
            results["election"] = preferred_election_pause(
                cluster, bootstrap, "bench-election", settings
            )
            results["rebalance"] = rebalance_with_a_new_broker(
                cluster, bootstrap, "bench-spread", args.rebalance_partitions,
                args.rebalance_mib, NEW_BROKER_ID, settings,
            )  # fmt: skip
        finally:
            cluster.close()
    results["machine"]["load_average_at_end"] = os.getloadavg()
    results["elapsed_s"] = time.monotonic() - started_s
    return results


def print_report(results: dict[str, Any]) -> None:
    free, slow, spread = (
        results["catch_up"],
        results["catch_up_throttled"],
        results["rebalance"],
    )
    print("| figure | value |")
    print("| --- | --- |")
    print(
        f"| catch-up by reassignment, no throttle | {free['mib_per_s']:.1f} MiB/s "
        f"({free['bytes'] / MIB:.0f} MiB in {free['seconds']:.1f} s) |"
    )
    print(
        f"| catch-up, throttled to {slow['throttle_bytes_per_s'] / MIB:g} MiB/s | "
        f"{slow['mib_per_s']:.1f} MiB/s ({slow['bytes'] / MIB:.0f} MiB in {slow['seconds']:.1f} s) |"
    )
    print(
        f"| rebalance giving broker {NEW_BROKER_ID} its share | {spread['seconds']:.1f} s, "
        f"{spread['moves']} moves ({spread['moves_copying']} copying), "
        f"{spread['bytes_to_new_broker'] / MIB:.0f} MiB to it, "
        f"{spread['mib_per_s']:.1f} MiB/s |"
    )
    print(f"| replicas per broker after | {spread['replicas_after']} |")
    election = results["election"]
    print(
        f"| write pause of a preferred-leader election | {election['pause_ms']:.0f} ms "
        f"(usual gap between acknowledged writes {election['usual_gap_ms']:.1f} ms; "
        f"the election call {election['election_call_ms']:.0f} ms; leader "
        f"{election['old_leader']} -> {election['new_leader']}; "
        f"{election['writes_failed']} writes failed) |"
    )
    print(f"| machine | {results['machine']} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.elastic",
        description=__doc__,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catch-up-mib", type=positive_int, default=100, help="(100)")
    parser.add_argument("--throttle-mib-per-s", type=float, default=10.0, help="(10)")
    parser.add_argument(
        "--rebalance-partitions", type=positive_int, default=6, help="partitions to spread (6)"
    )
    parser.add_argument("--rebalance-mib", type=positive_int, default=20, help="MiB each (20)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: a check, not figures")
    add_output_arguments(parser, "no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.throttle_mib_per_s <= 0:
        parser.error("--throttle-mib-per-s must be > 0")
    if args.tiny:
        args.catch_up_mib, args.rebalance_mib, args.throttle_mib_per_s = 2, 1, 1.0
    with sigterm_as_exit(), work_directory(args.work_dir, "twinlog-elastic-") as root:
        results = run(args, root)
    print_report(results)
    write_json(results, args.json)
    return 0
