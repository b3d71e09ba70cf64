"""``twinlog cluster elect-leaders --preferred``: lead partitions by their preferred leaders.

As Kafka's ``kafka-leader-election.sh --election-type PREFERRED``: each partition named
(``--topic T [--partition P]``, or every partition of every topic) is led again by its
first replica, where that replica is in sync; the controller decides
(``Admin.elect_preferred_leaders``). One line per partition; the status is 1 when any
could not move (its line says why), 0 otherwise.
"""

from __future__ import annotations

import argparse
from typing import Any

from twinlog.engine.broker.leader_elections import ElectionOutcome, ElectionResult
from twinlog.rpc.cli.common import connection_options, print_json, retry_policy
from twinlog.rpc.client import Admin


def run(args: argparse.Namespace) -> int:
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        partitions: list[tuple[str, int]] | None = None
        if args.topic is not None:
            if args.partition is not None:
                partitions = [(args.topic, args.partition)]
            else:
                count = len(admin.describe_topic(args.topic).partitions)
                partitions = [(args.topic, index) for index in range(count)]
        results = admin.elect_preferred_leaders(partitions, args.timeout_ms)
    if args.format == "json":
        print_json([result_json(result) for result in results])
    else:
        for result in results:
            print(result_line(result))
        moved = sum(result.outcome is ElectionOutcome.ELECTED for result in results)
        failed = sum(not result.succeeded for result in results)
        print(f"{moved} moved, {len(results) - moved - failed} led already, {failed} not moved")
    return 0 if all(result.succeeded for result in results) else 1


def result_line(result: ElectionResult) -> str:
    return f"{result.topic}-{result.partition}: {result.outcome.value} ({result.message})"


def result_json(result: ElectionResult) -> dict[str, Any]:
    return {
        "topic": result.topic,
        "partition": result.partition,
        "outcome": result.outcome.value,
        "leader": result.leader,
        "preferred": result.preferred,
        "message": result.message,
    }
