"""``twinlog cluster describe|elect-leaders|rebalance|decommission|up|certs``: look at a
cluster, move its leaders and replicas, retire a broker, or run one on this machine.

``describe`` (``cluster_describe``) reads the metadata from ZooKeeper or any broker and
asks each leader for its high watermark; ``elect-leaders`` (``cluster_elect``) leads
partitions by their preferred leaders; ``rebalance`` and ``decommission``
(``cluster_rebalance``) spread replicas over the brokers or empty one; ``up`` (``cluster_up``) starts a local
ZooKeeper and N brokers for development. docs/cli.md has the details.
"""

from __future__ import annotations

import argparse
from typing import Any

from twinlog.rpc.cli.arguments import non_negative_int, positive_int
from twinlog.rpc.cli.common import add_command, connection_parser, output_parser

DESCRIBE_EXAMPLE = """
twinlog cluster describe --zookeeper 127.0.0.1:2181/twinlog/dev
twinlog cluster describe --server 127.0.0.1:9001,127.0.0.1:9002 --topic orders
twinlog cluster describe --zookeeper 127.0.0.1:2181/twinlog/dev --format json
"""
ELECT_EXAMPLE = """
twinlog cluster elect-leaders --preferred --server 127.0.0.1:9001   # every partition
twinlog cluster elect-leaders --preferred --topic orders --partition 2 --server 127.0.0.1:9001
"""
REBALANCE_EXAMPLE = """
twinlog cluster rebalance --dry-run --server 127.0.0.1:9001      # the plan; nothing moves
twinlog cluster rebalance --execute --wait --throttle-bytes-per-s 10485760 --server 127.0.0.1:9001
"""
DECOMMISSION_EXAMPLE = """
twinlog cluster decommission --broker-id 4 --dry-run --server 127.0.0.1:9001
twinlog cluster decommission --broker-id 4 --server 127.0.0.1:9001
"""
UP_EXAMPLE = """
twinlog cluster up --brokers 3 --data-dir ./dev-cluster      # until Ctrl-C
twinlog topics create orders --partitions 4 --replication-factor 3 \\
    --server BOOTSTRAP_LIST_PRINTED_BY_UP
twinlog cluster up --data-dir ./dev-cluster --kafka-listeners   # Kafka clients too
"""
CERTS_EXAMPLE = """
twinlog cluster certs --out ./certs --brokers 1,2,3
twinlog serve --data-dir d1 --broker-id 1 --zookeeper 127.0.0.1:2181/twinlog/prod \\
    --inter-broker-tls-cert certs/broker-1.pem --inter-broker-tls-key certs/broker-1.key \\
    --inter-broker-tls-ca certs/ca.pem --tokens-file tokens.txt --acl-file acl.txt
"""


def register(subparsers: Any) -> None:
    cluster = add_command(
        subparsers,
        "cluster",
        "describe a cluster (brokers, leaders, ISRs, high watermarks), or run one locally",
        DESCRIBE_EXAMPLE + ELECT_EXAMPLE + REBALANCE_EXAMPLE + UP_EXAMPLE + CERTS_EXAMPLE,
        [],
    )
    actions = cluster.add_subparsers(dest="cluster_action", required=True, metavar="ACTION")
    describe = add_command(
        actions,
        "describe",
        "brokers, controller, and each partition's leader, epoch, replicas, ISR and high "
        "watermark; under-replicated partitions",
        DESCRIBE_EXAMPLE,
        [connection_parser(server_default=None), output_parser()],
    )
    describe.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[,...]/CHROOT",
        help="read the metadata from this ZooKeeper (the brokers' --zookeeper); else from "
        "any broker of --server",
    )
    describe.add_argument(
        "--zookeeper-auth-file",
        metavar="FILE",
        help="the brokers' ZooKeeper credentials file, for a cluster whose znodes are locked "
        "(twinlog serve --zookeeper-auth-file)",
    )
    describe.add_argument(
        "--topic", action="append", metavar="NAME", help="only this topic (repeatable)"
    )
    describe.set_defaults(run=_run_describe, validate=_validate_describe)
    elect = add_command(
        actions,
        "elect-leaders",
        "lead partitions by their preferred leaders (each its first replica) where that "
        "replica is in sync, as kafka-leader-election.sh --election-type PREFERRED",
        ELECT_EXAMPLE,
        [connection_parser(), output_parser()],
    )
    elect.add_argument(
        "--preferred",
        action="store_true",
        required=True,
        help="the election type (the only one: twinlog never elects a replica out of sync)",
    )
    elect.add_argument("--topic", metavar="NAME", help="only this topic's partitions")
    elect.add_argument("--partition", type=int, metavar="P", help="only this partition of --topic")
    elect.add_argument(
        "--timeout-ms",
        type=positive_int,
        default=30_000,
        help="how long to wait for the controller to carry it out (30000)",
    )
    elect.set_defaults(run=_run_elect, validate=_validate_elect)
    rebalance = add_command(
        actions,
        "rebalance",
        "spread replicas and preferred leaders evenly over the brokers (a new broker gets "
        "its share): print the plan, or run it",
        REBALANCE_EXAMPLE,
        [connection_parser(), output_parser()],
    )
    mode = rebalance.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", action="store_true", help="print the plan; move nothing")
    mode.add_argument("--execute", action="store_true", help="start the plan's moves")
    _add_move_options(rebalance)
    rebalance.add_argument(
        "--wait", action="store_true", help="with --execute: print progress until done"
    )
    rebalance.set_defaults(run=_run_rebalance)
    decommission = add_command(
        actions,
        "decommission",
        "move every replica off a broker, wait for the moves, then stop it (a controlled shutdown)",
        DECOMMISSION_EXAMPLE,
        [connection_parser(), output_parser()],
    )
    decommission.add_argument(
        "--broker-id", type=int, required=True, metavar="N", help="the broker to retire"
    )
    decommission.add_argument(
        "--dry-run", action="store_true", help="print the plan; move and stop nothing"
    )
    _add_move_options(decommission)
    decommission.set_defaults(run=_run_decommission)
    up = add_command(
        actions,
        "up",
        "start a local ZooKeeper and N brokers for development, until Ctrl-C or SIGTERM",
        UP_EXAMPLE,
        [],
    )
    up.add_argument("--data-dir", required=True, help="where ZooKeeper and each broker keep data")
    up.add_argument("--brokers", type=positive_int, default=3, help="how many brokers (3)")
    up.add_argument("--name", default="dev", help="the cluster's chroot, /twinlog/NAME (dev)")
    up.add_argument(
        "--zookeeper-session-timeout-ms",
        type=positive_int,
        default=6000,
        help="each broker's ZooKeeper session: how long a dead broker keeps its roles (6000)",
    )
    up.add_argument(
        "--tick-time-ms",
        type=positive_int,
        default=500,
        help="ZooKeeper's tickTime; sessions may last 2 to 20 ticks (500)",
    )
    up.add_argument(
        "--kafka-listeners",
        action="store_true",
        help="every broker also speaks Kafka's wire protocol, on a free loopback port "
        "(twinlog serve --kafka-listener); the Kafka bootstrap list is printed",
    )
    up.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for every broker (repeatable), as twinlog serve --config",
    )
    up.add_argument(
        "--no-restart",
        action="store_true",
        help="leave a broker that exits on its own down (default: start it again on its "
        "own ports, at most 3 times a minute)",
    )
    up.set_defaults(run=_run_up)
    certs = add_command(
        actions,
        "certs",
        "make a throwaway cluster CA and a certificate per broker (CN=twinlog-broker-ID), "
        "for twinlog serve --inter-broker-tls-*; an existing CA in --out is reused",
        CERTS_EXAMPLE,
        [],
    )
    certs.add_argument("--out", required=True, help="the folder to write them in (made)")
    certs.add_argument(
        "--brokers",
        required=True,
        metavar="ID[,ID...]",
        help="the broker ids to make certificates for, e.g. 1,2,3",
    )
    certs.add_argument(
        "--days", type=positive_int, default=365, help="how long they are valid (365)"
    )
    certs.set_defaults(run=_run_certs, validate=_validate_certs)


def _validate_describe(args: argparse.Namespace) -> str | None:
    if bool(args.zookeeper) == bool(args.server):
        return "cluster describe needs one of --zookeeper CONNECT or --server BOOTSTRAP_LIST"
    return None


def _add_move_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--throttle-bytes-per-s",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="each new replica copies at most N bytes a second (default 0: no limit)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=positive_int,
        default=3_600_000,
        help="how long to wait for the moves to complete (3600000); they run on after it",
    )


def _run_rebalance(args: argparse.Namespace) -> int:
    from twinlog.rpc.cli import cluster_rebalance

    return cluster_rebalance.run_rebalance(args)


def _run_decommission(args: argparse.Namespace) -> int:
    from twinlog.rpc.cli import cluster_rebalance

    return cluster_rebalance.run_decommission(args)


def _validate_elect(args: argparse.Namespace) -> str | None:
    if args.partition is not None and args.topic is None:
        return "--partition needs --topic"
    if args.partition is not None and args.partition < 0:
        return f"--partition is {args.partition}, expected 0 or more"
    return None


def _run_elect(args: argparse.Namespace) -> int:
    from twinlog.rpc.cli import cluster_elect

    return cluster_elect.run(args)


def _run_describe(args: argparse.Namespace) -> int:
    from twinlog.rpc.cli import cluster_describe

    return cluster_describe.run(args)


def _broker_ids(text: str) -> list[int] | None:
    words = [word.strip() for word in text.split(",")]
    if not words or not all(word.isdigit() for word in words):
        return None
    return sorted({int(word) for word in words})


def _validate_certs(args: argparse.Namespace) -> str | None:
    if _broker_ids(args.brokers) is None:
        return f"--brokers {args.brokers!r}: give broker ids (0 or more) separated by commas"
    return None


def _run_certs(args: argparse.Namespace) -> int:
    from pathlib import Path

    from twinlog.rpc.cli.cluster_certs import make_broker_certificates

    ids = _broker_ids(args.brokers) or []
    made = make_broker_certificates(Path(args.out), ids, args.days)
    for broker_id, files in made.items():
        print(f"broker {broker_id}: {' '.join(files.serve_arguments())}")
    print(
        f"keep {Path(args.out) / 'ca.key'} off the brokers: it signs new brokers into the cluster"
    )
    return 0


def _run_up(args: argparse.Namespace) -> int:
    from twinlog.rpc.cli import cluster_up

    return cluster_up.run(args)
