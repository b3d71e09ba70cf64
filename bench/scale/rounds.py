"""One deployment, every producer count: the rows of the table.

The producer processes are started once (the most any count needs) and warmed up; each
count then runs the first N of them for ``seconds``. Around each count the servers'
CPU time and context switches are read from /proc (``bench.e2e.process_cost``, summed
over the servers of the deployment), so that the cost per transaction covers exactly
the transactions the count committed; and once, before the first count, over
``idle_seconds`` with every producer connected and idle, once no transaction is in
flight any more (a warm-up's completion runs on after its commit: for seconds on the
cluster): the servers' cost per second
without transactions, which each count's cost per transaction includes too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.cluster.waiting import wait_for
from bench.e2e import process_cost
from bench.e2e.workload import percentile
from bench.scale.deployment import Deployment
from bench.scale.producer_group import ProducerGroup
from bench.scale.settings import TOPIC, ScaleSettings
from bench.scale.transactional_ids import coordinators_reached, transactional_ids
from twinlog.rpc.client.remote import RemoteBroker

ERRORS_SHOWN = 5


def servers_cost(pids: Sequence[int]) -> list[process_cost.ProcessCost]:
    samples = [process_cost.sample(pid) for pid in pids]
    return [sample for sample in samples if sample is not None]


def cost_per(
    before: list[process_cost.ProcessCost],
    after: list[process_cost.ProcessCost],
    units: float,
) -> dict[str, float]:
    """The servers' CPU (ms) and context switches per unit (a transaction, a second); NaN
    where /proc did not tell (not Linux) or there are no units."""
    if not before or len(before) != len(after) or units <= 0:
        return dict.fromkeys(("cpu_ms", "user_ms", "system_ms", "context_switches"), math.nan)
    spent = [later.minus(earlier) for earlier, later in zip(before, after, strict=True)]
    total = process_cost.ProcessCost(
        sum(cost.user_s for cost in spent),
        sum(cost.system_s for cost in spent),
        sum(cost.context_switches for cost in spent),
    )
    return total.per(units)


def summarize(
    producers: int, reports: list[dict[str, Any]], cost: dict[str, float]
) -> dict[str, Any]:
    def samples(name: str) -> list[float]:
        return [value for report in reports for value in report[name]]

    committed = sum(report["committed"] for report in reports)
    return {
        "producers": producers,
        "committed": committed,
        "failed": sum(report["failed"] for report in reports),
        "unknown": sum(report["unknown"] for report in reports),
        # each process's own rate, summed: they all ran for the same seconds, together
        "transactions_per_s": sum(
            report["committed"] / report["elapsed_s"] for report in reports if report["elapsed_s"]
        ),
        "commit_p50_ms": percentile(samples("commit_s"), 0.5) * 1000,
        "commit_p99_ms": percentile(samples("commit_s"), 0.99) * 1000,
        "begin_p50_ms": percentile(samples("begin_s"), 0.5) * 1000,
        "flush_p50_ms": percentile(samples("flush_s"), 0.5) * 1000,
        "transaction_p50_ms": percentile(samples("transaction_s"), 0.5) * 1000,
        "server_cpu_ms_per_transaction": cost["cpu_ms"],
        "server_user_ms_per_transaction": cost["user_ms"],
        "server_system_ms_per_transaction": cost["system_ms"],
        "context_switches_per_transaction": cost["context_switches"],
        "errors": [error for report in reports for error in report["errors"]][:ERRORS_SHOWN],
    }


def wait_settled(deployment: Deployment, timeout_s: float) -> None:
    """Until no server lists a transaction in flight (prepared ones completing included)."""
    options = deployment.options()
    clients = [RemoteBroker(address, options) for address in deployment.bootstrap.split(",")]
    try:
        wait_for(
            "no transaction in flight (the warm-ups completed)",
            lambda: not any(client.list_transactions() for client in clients),
            timeout_s,
            interval_s=0.1,
        )
    finally:
        for client in clients:
            client.close()


def measure_deployment(
    deployment: Deployment, settings: ScaleSettings, announce: Callable[[str], None]
) -> dict[str, Any]:
    size = max(settings.producers)
    announce(f"starting {size} producer processes")
    ids = transactional_ids(size, deployment.coordinators, settings.spread_ids)
    rows = []
    credentials = deployment.security.producer_arguments()
    with ProducerGroup(deployment.bootstrap, TOPIC, ids, settings, credentials) as group:
        announce("waiting for the warm-ups' completions")
        wait_settled(deployment, settings.settle_timeout_s)
        announce(f"the servers idle for {settings.idle_seconds:g} s")
        before = servers_cost(deployment.pids)
        time.sleep(settings.idle_seconds)
        idle = cost_per(before, servers_cost(deployment.pids), settings.idle_seconds)
        for count in settings.producers:
            announce(f"{count} producers for {settings.seconds:g} s")
            before = servers_cost(deployment.pids)
            reports = group.run(count, settings.seconds)
            after = servers_cost(deployment.pids)
            committed = sum(report["committed"] for report in reports)
            cost = cost_per(before, after, committed)
            row = summarize(count, reports, cost)
            row["coordinators_reached"] = coordinators_reached(ids[:count], deployment.coordinators)
            row["security"] = deployment.security.mode
            rows.append(row)
    return {
        "kind": deployment.key,
        "name": deployment.name,
        "security": deployment.security.mode,
        "servers_said": list(deployment.servers_said),
        "servers": len(deployment.pids),
        "coordinators": deployment.coordinators,
        # per second, every producer process connected and idle: what the servers spend
        # without transactions (heartbeats, replica fetches), also in each row's CPU/txn
        "idle_cpu_ms_per_s": idle["cpu_ms"],
        "idle_context_switches_per_s": idle["context_switches"],
        "rows": rows,
    }
