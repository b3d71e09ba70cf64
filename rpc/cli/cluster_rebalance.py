"""``twinlog cluster rebalance`` and ``twinlog cluster decommission``: spread the replicas
and preferred leaders over the brokers, or empty one broker and stop it.

``rebalance --dry-run`` prints the plan (``Admin.plan_rebalance``: a new broker gets its
share, every broker about as many replicas and preferred leaders as the others) and
changes nothing; ``--execute`` starts its moves and, with ``--wait``, prints their
progress until they complete. ``decommission --broker-id N`` plans every replica off
broker N, runs the moves, waits for them, then asks broker N for a controlled shutdown
(``Admin.shutdown_broker``). Both refuse a plan that would leave a partition fewer
replicas than its ``min.insync.replicas``, and refuse while a reassignment runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from twinlog.engine.broker.rebalance_plan import RebalancePlan
from twinlog.rpc.cli.common import connection_options, print_json, retry_policy
from twinlog.rpc.cli.partitions import wait_until_moved
from twinlog.rpc.client import Admin


def run_rebalance(args: argparse.Namespace) -> int:
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        plan = admin.plan_rebalance()
        show(plan, args.format)
        if not args.execute or not plan.moves:
            if not args.execute and plan.moves:
                print("a dry run: nothing moved (run again with --execute)", file=sys.stderr)
            return 0
        if not _started(admin, plan, args.throttle_bytes_per_s):
            return 1
        if not args.wait:
            print("follow the moves with: twinlog partitions reassignments", file=sys.stderr)
            return 0
        return wait_until_moved(admin, _keys(plan), args.timeout_ms)


def run_decommission(args: argparse.Namespace) -> int:
    broker_id = args.broker_id
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        plan = admin.plan_rebalance(leaving=[broker_id])
        show(plan, args.format)
        if args.dry_run:
            print("a dry run: nothing moved, no broker stopped", file=sys.stderr)
            return 0
        if plan.moves:
            if not _started(admin, plan, args.throttle_bytes_per_s):
                return 1
            if wait_until_moved(admin, _keys(plan), args.timeout_ms) != 0:
                print(
                    f"broker {broker_id} is not stopped: its replicas are still moving",
                    file=sys.stderr,
                )
                return 1
        admin.shutdown_broker(broker_id)
        print(f"broker {broker_id} holds no replica and is stopping (controlled shutdown)")
    return 0


def _started(admin: Admin, plan: RebalancePlan, throttle_bytes_per_s: int) -> bool:
    refused = [r for r in admin.execute_plan(plan, throttle_bytes_per_s) if r.error is not None]
    for result in refused:
        print(
            f"{result.topic}-{result.partition}: {type(result.error).__name__}: {result.error}",
            file=sys.stderr,
        )
    return not refused


def _keys(plan: RebalancePlan) -> list[tuple[str, int]]:
    return [(move.topic, move.partition) for move in plan.moves]


def show(plan: RebalancePlan, output: str) -> None:
    if output == "json":
        print_json(plan_json(plan))
        return
    if not plan.moves:
        print("balanced already: no move")
    for move in plan.moves:
        kind = "" if move.copies else " (a new order: nothing copied)"
        print(f"{move.topic}-{move.partition}: {list(move.replicas)} -> {list(move.target)}{kind}")
    print("broker  replicas now -> after  preferred leader of now -> after")
    for broker_id in plan.replicas_before:
        print(
            f"{broker_id:>6}  {plan.replicas_before[broker_id]:>12} -> "
            f"{plan.replicas_after[broker_id]:<5}  {plan.leaders_before[broker_id]:>23} -> "
            f"{plan.leaders_after[broker_id]}"
        )


def plan_json(plan: RebalancePlan) -> dict[str, Any]:
    return {
        "moves": [
            {
                "topic": move.topic,
                "partition": move.partition,
                "replicas": list(move.replicas),
                "target": list(move.target),
                "copies": move.copies,
            }
            for move in plan.moves
        ],
        "brokers": [
            {
                "broker_id": broker_id,
                "replicas_before": plan.replicas_before[broker_id],
                "replicas_after": plan.replicas_after[broker_id],
                "leaders_before": plan.leaders_before[broker_id],
                "leaders_after": plan.leaders_after[broker_id],
            }
            for broker_id in plan.replicas_before
        ],
    }
