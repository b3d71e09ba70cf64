"""``twinlog partitions reassign|reassignments``: move a partition's replicas, and watch.

As Kafka's ``kafka-reassign-partitions.sh``: ``reassign --topic T --partition P --replicas
2,3,4`` asks the controller to move the partition (``Admin.reassign_partitions``) while
it is written and read; new replicas copy at most ``--throttle-bytes-per-s``, join the
ISR once caught up, leadership moves if the leader leaves, and the brokers left drop
their copies. ``--wait`` prints the progress each second until it completes;
``--cancel`` moves it back to where it was. ``reassignments`` lists what runs, with how
many bytes each new replica is behind. docs/cli.md has the details.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from typing import Any

from twinlog.engine.base.errors import RequestTimedOutError
from twinlog.engine.broker.reassignments import Reassignment
from twinlog.rpc.cli.arguments import non_negative_int, positive_int
from twinlog.rpc.cli.common import (
    add_command,
    connection_options,
    connection_parser,
    output_parser,
    print_json,
    retry_policy,
)
from twinlog.rpc.client import Admin

REASSIGN_EXAMPLE = """
twinlog partitions reassign --topic orders --partition 0 --replicas 2,3,4 --server 127.0.0.1:9001
twinlog partitions reassign --topic orders --partition 0 --replicas 2,3,4 \\
    --throttle-bytes-per-s 10485760 --wait --server 127.0.0.1:9001
twinlog partitions reassign --topic orders --partition 0 --cancel --server 127.0.0.1:9001
"""
LIST_EXAMPLE = """
twinlog partitions reassignments --server 127.0.0.1:9001
twinlog partitions reassignments --server 127.0.0.1:9001 --format json
"""
WAIT_POLL_S = 1.0
WAIT_TIMEOUT_MS_DEFAULT = 600_000


def register(subparsers: Any) -> None:
    partitions = add_command(
        subparsers,
        "partitions",
        "move partitions' replicas to other brokers, and watch the moves",
        REASSIGN_EXAMPLE + LIST_EXAMPLE,
        [],
    )
    actions = partitions.add_subparsers(dest="partitions_action", required=True, metavar="ACTION")
    reassign = add_command(
        actions,
        "reassign",
        "move a partition to other replicas while it is written and read, as "
        "kafka-reassign-partitions.sh --execute (or --cancel)",
        REASSIGN_EXAMPLE,
        [connection_parser()],
    )
    reassign.add_argument("--topic", required=True, metavar="NAME")
    reassign.add_argument("--partition", required=True, type=non_negative_int, metavar="P")
    target = reassign.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--replicas",
        type=_broker_ids,
        metavar="IDS",
        help="the target broker ids, comma-separated; the first is the preferred leader",
    )
    target.add_argument("--cancel", action="store_true", help="move it back to the replicas it had")
    reassign.add_argument(
        "--throttle-bytes-per-s",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="each new replica copies at most N bytes a second (default 0: no limit)",
    )
    reassign.add_argument(
        "--wait",
        action="store_true",
        help="print the progress each second until the move completes",
    )
    reassign.add_argument(
        "--timeout-ms",
        type=positive_int,
        default=WAIT_TIMEOUT_MS_DEFAULT,
        help="how long --wait waits for the move to complete (600000); the controller "
        "is given 30000 to take the move either way",
    )
    reassign.set_defaults(run=run_reassign)
    listing = add_command(
        actions,
        "reassignments",
        "the moves that run, with how far behind each new replica is",
        LIST_EXAMPLE,
        [connection_parser(), output_parser()],
    )
    listing.set_defaults(run=run_list)


def _broker_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give broker ids separated by commas, e.g. 2,3,4"
        ) from None
    if any(broker_id < 0 for broker_id in ids):
        raise argparse.ArgumentTypeError(f"{text!r}: broker ids are 0 or more")
    return ids


def run_reassign(args: argparse.Namespace) -> int:
    key = (args.topic, args.partition)
    where = f"{args.topic}-{args.partition}"
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        target = None if args.cancel else args.replicas
        (result,) = admin.reassign_partitions({key: target}, args.throttle_bytes_per_s)
        if result.error is not None:
            print(f"{where}: {type(result.error).__name__}: {result.error}", file=sys.stderr)
            return 1
        print(f"{where}: " + ("cancelling" if target is None else f"moving to {list(target)}"))
        if not args.wait:
            print("follow it with: twinlog partitions reassignments", file=sys.stderr)
            return 0
        return wait_until_moved(admin, [key], args.timeout_ms)


def wait_until_moved(admin: Admin, keys: Iterable[tuple[str, int]], timeout_ms: int) -> int:
    """Print the progress of the moves of ``keys`` each second until none runs (0), or
    ``timeout_ms`` passed (1: they run on)."""
    waiting = set(keys)
    deadline_s = time.monotonic() + timeout_ms / 1000
    while True:
        running = {(r.topic, r.partition): r for r in admin.partition_reassignments()}
        for key in sorted(waiting - running.keys()):
            print(f"{key[0]}-{key[1]}: done", flush=True)
        waiting &= running.keys()
        if not waiting:
            return 0
        for key in sorted(waiting):
            print(reassignment_line(running[key]), flush=True)
        if time.monotonic() >= deadline_s:
            error = RequestTimedOutError(
                f"{len(waiting)} move(s) still run after {timeout_ms} ms; they go on "
                "(twinlog partitions reassignments), or cancel them (twinlog partitions "
                "reassign --cancel)"
            )
            print(f"{type(error).__name__}: {error}", file=sys.stderr)
            return 1
        time.sleep(WAIT_POLL_S)


def run_list(args: argparse.Namespace) -> int:
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        running = admin.partition_reassignments()
    if args.format == "json":
        print_json([reassignment_json(r) for r in running])
    elif not running:
        print("no reassignment runs")
    else:
        for reassignment in running:
            print(reassignment_line(reassignment))
    return 0


def reassignment_line(r: Reassignment) -> str:
    """``orders-0: [1, 2, 3] -> [2, 3, 4], leader 2, adding 4 (1200 bytes behind)``."""
    behind = {p.broker_id: p for p in r.progress}
    adding = []
    for broker_id in r.adding:
        progress = behind.get(broker_id)
        if progress is None:
            adding.append(f"{broker_id}")
        elif progress.in_sync:
            adding.append(f"{broker_id} (in sync)")
        elif progress.bytes_behind < 0:
            adding.append(f"{broker_id} (not fetched yet)")
        else:
            adding.append(f"{broker_id} ({progress.bytes_behind} bytes behind)")
    text = f"{r.topic}-{r.partition}: {list(r.original)} -> {list(r.target)}, leader {r.leader}"
    if adding:
        text += ", adding " + ", ".join(adding)
    if r.removing:
        text += f", removing {', '.join(map(str, r.removing))}"
    if r.throttle_bytes_per_s:
        text += f", throttled to {r.throttle_bytes_per_s} bytes/s"
    return text


def reassignment_json(r: Reassignment) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "partition": r.partition,
        "replicas": list(r.replicas),
        "adding": list(r.adding),
        "removing": list(r.removing),
        "original": list(r.original),
        "leader": r.leader,
        "throttle_bytes_per_s": r.throttle_bytes_per_s,
        "progress": [
            {
                "broker_id": p.broker_id,
                "offsets_behind": p.offsets_behind,
                "bytes_behind": p.bytes_behind,
                "in_sync": p.in_sync,
            }
            for p in r.progress
        ],
    }
