"""The ratios of a run, and its table.

vs fewest       a deployment's transactions/s at N producers / at its fewest (1 by
                default): 1.00 at every N means commits are served one at a time
RF3 / one node  the cluster's transactions/s / one node's, at the same N
vs SQLite       one node's transactions/s / the SQLite baseline's; the headline is
                at 8 producers (or the most asked for, if 8 is not)
"""

from __future__ import annotations

import math
from typing import Any

HEADLINE_PRODUCERS = 8


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def add_ratios(results: dict[str, Any]) -> None:
    deployments = results["deployments"]
    for deployment in deployments.values():
        rows = deployment["rows"]
        fewest = rows[0]["transactions_per_s"]
        for row in rows:
            row["vs_fewest_producers"] = _ratio(row["transactions_per_s"], fewest)
    one_node = {row["producers"]: row for row in deployments["one_node"]["rows"]}
    sqlite_rate = results["sqlite"]["transactions_per_s"]
    for row in one_node.values():
        row["vs_sqlite"] = _ratio(row["transactions_per_s"], sqlite_rate)
    if "rf3" in deployments:
        for row in deployments["rf3"]["rows"]:
            row["rf3_vs_one_node"] = _ratio(
                row["transactions_per_s"], one_node[row["producers"]]["transactions_per_s"]
            )
    producers = HEADLINE_PRODUCERS if HEADLINE_PRODUCERS in one_node else max(one_node)
    results["headline"] = {
        "producers": producers,
        "one_node_vs_sqlite": one_node[producers]["vs_sqlite"],
    }


def _cell(value: float, width: int, decimals: int) -> str:
    return f"{value:>{width}.{decimals}f}" if math.isfinite(value) else f"{'-':>{width}}"


def print_table(results: dict[str, Any]) -> None:
    settings = results["settings"]
    print(
        f"\ntransactions of {settings['records_per_transaction']} x "
        f"{settings['record_bytes']:,} B records over {settings['partitions']} partitions, "
        f"each producer a process with its own transactional id, "
        f"{settings['seconds']:g} s per row"
    )
    deployments = results["deployments"]
    fewest = settings["producers"][0]
    header = (
        f"{'':<20}{'producers':>9}{'txn/s':>8}{f'vs {fewest}':>6}{'begin p50':>11}"
        f"{'flush p50':>11}{'commit p50':>12}{'p99':>10}{'CPU/txn':>10}{'switches':>9}"
        f"{'coord.':>7}"
    )
    if "rf3" in deployments:
        header += f"{'RF3/one node':>14}"
    print(header)
    for deployment in deployments.values():
        for row in deployment["rows"]:
            reached = f"{row['coordinators_reached']}/{deployment['coordinators']}"
            line = (
                f"{deployment['name']:<20}{row['producers']:>9}"
                f"{_cell(row['transactions_per_s'], 8, 1)}"
                f"{_cell(row['vs_fewest_producers'], 6, 2)}"
                f"{_cell(row['begin_p50_ms'], 8, 1)} ms{_cell(row['flush_p50_ms'], 8, 1)} ms"
                f"{_cell(row['commit_p50_ms'], 9, 1)} ms{_cell(row['commit_p99_ms'], 7, 1)} ms"
                f"{_cell(row['server_cpu_ms_per_transaction'], 7, 2)} ms"
                f"{_cell(row['context_switches_per_transaction'], 9, 0)}"
                f"{reached:>7}"
            )
            if "rf3_vs_one_node" in row:
                line += _cell(row["rf3_vs_one_node"], 14, 2)
            print(line)
    print(
        "(CPU/txn and switches: the server processes' CPU time and context switches, all "
        "threads, per committed transaction; coord.: the transaction coordinators the "
        f"row's transactional ids reach{', chosen to spread' if settings['spread_ids'] else ''})"
    )
    for deployment in deployments.values():
        print(
            f"{deployment['name']}, idle: CPU "
            f"{_cell(deployment['idle_cpu_ms_per_s'], 0, 0).strip()} ms/s, "
            f"{_cell(deployment['idle_context_switches_per_s'], 0, 0).strip()} switches/s "
            "(every producer connected, none committing)"
        )
    for deployment in deployments.values():
        rows = deployment["rows"]
        failed = sum(row["failed"] for row in rows)
        unknown = sum(row["unknown"] for row in rows)
        errors = [error for row in rows for error in row["errors"]]
        line = f"{deployment['name']}: {failed} failed, {unknown} unknown transactions"
        print(line + (f" (e.g. {errors[0]})" if errors else ""))
    sqlite = results["sqlite"]
    print(
        f"\nSQLite WAL synchronous=FULL, one writer, one executemany per transaction: "
        f"{sqlite['transactions_per_s']:,.1f} txn/s"
    )
    headline = results["headline"]
    print(
        f"one node {headline['producers']} producers / SQLite: "
        f"{_cell(headline['one_node_vs_sqlite'], 0, 2).strip()}"
    )
    machine = results["machine"]
    start, end = machine["load_average_at_start"][0], machine["load_average_at_end"][0]
    print(
        f"load average {start:.1f} at start, {end:.1f} at end, {machine['cores']} cores "
        "(servers, producers and anything else share them: compare ratios)"
    )
