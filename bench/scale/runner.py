"""``python -m bench.scale``: do many producers committing small transactions get more
throughput than one?

Each producer is an OS process (``bench.scale.producer``) with a transactional
``Producer`` of its own transactional id, committing transactions back to back:
begin, 10 records of 1 KiB random bytes spread over the 4 partitions of one topic,
flush, commit. For every producer count (1, 2, 4, 8, 16), for ``--seconds`` each, on

    one node        a ``twinlog serve`` (default settings)
    three brokers   ``twinlog serve --broker-id N --zookeeper ...`` x 3 on a local
                    ZooKeeper, as ``bench.cluster`` starts them: replication factor 3,
                    acks=all, min ISR 2 (skipped with --no-cluster)

it reports the transactions committed per second (all producers together), the p50 of
the begin, flush and commit calls and the commit's p99, and the servers' CPU time and
context switches per transaction (from /proc: every thread of every server process). Then the ratios:
N producers / 1 producer on each deployment (1.00 throughout means commits are served
one at a time), RF 3 / one node at each count, and one node at 8 producers / SQLite
(WAL, synchronous=FULL, one writer, the same 10 rows per transaction).

The transactional ids are bench-scale-0, bench-scale-1, ... as an application would name
them; each row says how many transaction coordinators they reach (CRC-32C of the id mod
the coordinator count: ids differing in one trailing digit reach 2 of 4, so these reach
2 up to 10 producers and 4 at 16). ``--spread-ids`` chooses ids that reach every
coordinator in turn.

Security (``--security``, ``bench.scale.security``): ``tokens`` by default, as a cluster
is secured in docs/operations.md ("Securing a cluster"): the producers present a bearer
token and the servers check it and the ACLs on every request; the brokers call each
other over mutual TLS and lock their znodes with a ZooKeeper credential. ``tls`` adds
TLS on the client port, ``off`` takes everything away. Several modes joined by commas
(``off,tokens,tls``) run each deployment in every mode, one after another, and end with
the transactions/s of each mode over each less secured one at every producer count.

Everything runs on this machine, on loopback: compare ratios, not absolute figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cluster.cluster import BROKER_IDS
from bench.cluster.report import machine_note
from bench.cluster.runner import Announcer, parse_counts, sigterm_as_exit
from bench.e2e.runner import add_output_arguments, work_directory, write_json
from bench.scale.baseline import sqlite_baseline
from bench.scale.deployment import one_node, three_brokers
from bench.scale.report import add_ratios, print_table
from bench.scale.rounds import measure_deployment
from bench.scale.security import DESCRIPTIONS, MODES, Security, parse_modes
from bench.scale.settings import TINY, ScaleSettings
from twinlog.rpc.cli.interrupts import EXIT_INTERRUPTED


def run(
    settings: ScaleSettings, root: Path, server_config: Sequence[str], quiet: bool
) -> dict[str, Any]:
    announce = Announcer(quiet)
    results: dict[str, Any] = {
        "settings": dataclasses.asdict(settings),
        "server_config": list(server_config),
        "machine": machine_note(),
        "deployments": {},
    }
    announce.part = "sqlite"
    announce("WAL synchronous=FULL, one writer")
    results["sqlite"] = sqlite_baseline(root / "sqlite", settings)
    broker_ids = BROKER_IDS if settings.cluster else ()
    securities = {
        mode: Security.write(mode, root / "security" / mode, broker_ids)
        for mode in settings.security
    }
    starts = [one_node] + ([three_brokers] if settings.cluster else [])
    # Every mode of a deployment back to back: the figures a ratio compares are taken
    # close together, under about the same load from the rest of the machine.
    for start in starts:
        for mode, security in securities.items():
            where = "one node" if start is one_node else "three brokers"
            announce.part = f"{where}, security {mode}"
            with start(root / mode, settings, server_config, security, announce) as deployment:
                results["deployments"][f"{deployment.key}/{mode}"] = measure_deployment(
                    deployment, settings, announce
                )
    results["machine"]["load_average_at_end"] = os.getloadavg()
    results["elapsed_s"] = time.monotonic() - announce.started_s
    add_ratios(results)
    return results


def failures(results: dict[str, Any]) -> int:
    """Failed and unknown transactions of the whole run."""
    return sum(
        row["failed"] + row["unknown"]
        for deployment in results["deployments"].values()
        for row in deployment["rows"]
    )


EXAMPLE = """
example:
  python -m bench.scale                         # about 3 minutes on two cores
  python -m bench.scale --security off,tokens,tls  # about 3 minutes per mode
  python -m bench.scale --no-cluster --json scale.json
  python -m bench.scale --producers 1,4,8 --seconds 20
  python -m bench.scale --no-cluster --spread-ids  # ids that reach every coordinator
  python -m bench.scale --tiny                  # producers 1,2 for 1 s: a check, not figures
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description=__doc__,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = ScaleSettings()
    parser.add_argument(
        "--producers",
        metavar="N,N,...",
        help="producer counts, one row each, ascending "
        f"({','.join(map(str, defaults.producers))}; --tiny: "
        f"{','.join(map(str, TINY.producers))})",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        help=f"how long each count commits ({defaults.seconds:g}; --tiny: {TINY.seconds:g})",
    )
    parser.add_argument(
        "--no-cluster", action="store_true", help="one node only (no ZooKeeper, no brokers)"
    )
    parser.add_argument(
        "--spread-ids",
        action="store_true",
        help="transactional ids chosen to reach every transaction coordinator in turn "
        "(default: bench-scale-0, -1, ..., which reach only 2 of 4 up to 10 producers)",
    )
    parser.add_argument(
        "--security",
        metavar="MODE[,MODE...]",
        default=",".join(defaults.security),
        help="how the servers are secured, and so what each producer presents: "
        + "; ".join(f"{mode}: {DESCRIPTIONS[mode]}" for mode in MODES)
        + f" (default {','.join(defaults.security)}, what docs/operations.md 'Securing a "
        "cluster' sets up). Several, joined by commas, run every deployment in each mode and "
        "end with the txn/s ratios between them; each mode adds about 3 minutes to a "
        "default run",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="tiny sizes: checks that it all works, no figures"
    )
    parser.add_argument(
        "--server-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to every twinlog serve as --config (e.g. log_flush_policy=interval)",
    )
    add_output_arguments(parser, "no progress lines on stderr")
    args = parser.parse_args(argv)
    settings = TINY if args.tiny else defaults
    changes: dict[str, Any] = {"cluster": not args.no_cluster, "spread_ids": args.spread_ids}
    try:
        changes["security"] = parse_modes(args.security)
    except ValueError as error:
        parser.error(f"--security: {error}")
    if args.producers is not None:
        counts = parse_counts("--producers", args.producers)
        if min(counts) < 1 or list(counts) != sorted(set(counts)):
            parser.error("--producers takes counts >= 1, ascending, each once: 1,2,4")
        changes["producers"] = counts
    if args.seconds is not None:
        if args.seconds <= 0:
            parser.error("--seconds must be > 0")
        changes["seconds"] = args.seconds
    settings = dataclasses.replace(settings, **changes)
    try:
        with sigterm_as_exit(), work_directory(args.work_dir, "twinlog-bench-scale-") as root:
            results = run(settings, root, args.server_config, args.quiet)
    except KeyboardInterrupt:  # every process it started is stopped by then
        print("bench.scale: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    print_table(results)
    write_json(results, args.json)
    return 1 if failures(results) else 0
