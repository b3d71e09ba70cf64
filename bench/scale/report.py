"""The ratios of a run, and its table.

The report's ``deployments`` are keyed ``KIND/MODE`` (``one_node/tokens``,
``rf3/tls``), each with its ``kind``, its ``security`` mode, and the mode in every row.

vs fewest       a deployment's transactions/s at N producers / at its fewest (1 by
                default): 1.00 at every N means commits are served one at a time
RF3 / one node  the cluster's transactions/s / one node's, at the same N and security
vs SQLite       one node's transactions/s / the SQLite baseline's, for each security
                mode; the headline is at 8 producers (or the most asked for, if 8 is not)
security        with several modes, ``security_ratios``: each deployment's
                transactions/s in one mode / in a less secured one (``tls / off``), at
                each N
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

from bench.scale.security import DESCRIPTIONS, MODES

HEADLINE_PRODUCERS = 8


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def _modes(results: dict[str, Any]) -> list[str]:
    """The run's security modes, in the order they were asked for."""
    return list(results["settings"]["security"])


def _by_producers(deployment: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {row["producers"]: row for row in deployment["rows"]}


def add_ratios(results: dict[str, Any]) -> None:
    deployments = results["deployments"]
    for deployment in deployments.values():
        rows = deployment["rows"]
        fewest = rows[0]["transactions_per_s"]
        for row in rows:
            row["vs_fewest_producers"] = _ratio(row["transactions_per_s"], fewest)
    sqlite_rate = results["sqlite"]["transactions_per_s"]
    headline: dict[str, Any] = {"one_node_vs_sqlite": {}}
    for mode in _modes(results):
        one_node = _by_producers(deployments[f"one_node/{mode}"])
        for row in one_node.values():
            row["vs_sqlite"] = _ratio(row["transactions_per_s"], sqlite_rate)
        if f"rf3/{mode}" in deployments:
            for row in deployments[f"rf3/{mode}"]["rows"]:
                row["rf3_vs_one_node"] = _ratio(
                    row["transactions_per_s"], one_node[row["producers"]]["transactions_per_s"]
                )
        producers = HEADLINE_PRODUCERS if HEADLINE_PRODUCERS in one_node else max(one_node)
        headline["producers"] = producers
        headline["one_node_vs_sqlite"][mode] = one_node[producers]["vs_sqlite"]
    results["headline"] = headline
    results["security_ratios"] = security_ratios(results)


def security_ratios(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each deployment's transactions/s in a mode / in each less secured mode of the run
    (``MODES`` order, whatever order they ran in), at every producer count."""
    deployments = results["deployments"]
    modes = sorted(_modes(results), key=MODES.index)
    kinds = dict.fromkeys(deployment["kind"] for deployment in deployments.values())
    ratios = []
    for kind in kinds:
        for less, more in combinations(modes, 2):
            below, above = deployments[f"{kind}/{less}"], deployments[f"{kind}/{more}"]
            rates = _by_producers(below)
            ratios.append({
                "kind": kind,
                "name": above["name"],
                "numerator": more,
                "denominator": less,
                "transactions_per_s": {
                    str(row["producers"]): _ratio(
                        row["transactions_per_s"], rates[row["producers"]]["transactions_per_s"]
                    )
                    for row in above["rows"]
                },
            })  # fmt: skip
    return ratios


def _cell(value: float, width: int, decimals: int) -> str:
    return f"{value:>{width}.{decimals}f}" if math.isfinite(value) else f"{'-':>{width}}"


def print_table(results: dict[str, Any]) -> None:
    """One block per security mode (its deployments' rows), then the notes, the failures,
    the ratios between modes, SQLite and the load."""
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
    if any(deployment["kind"] == "rf3" for deployment in deployments.values()):
        header += f"{'RF3/one node':>14}"
    for mode in _modes(results):
        print(f"\nsecurity {mode}: {DESCRIPTIONS[mode]}")
        _print_block(header, [d for d in deployments.values() if d["security"] == mode])
    print(
        "\n(CPU/txn and switches: the server processes' CPU time and context switches, all "
        "threads, per committed transaction; coord.: the transaction coordinators the "
        f"row's transactional ids reach{', chosen to spread' if settings['spread_ids'] else ''})"
    )
    for deployment in deployments.values():
        print(
            f"{_label(deployment)}, idle: CPU "
            f"{_cell(deployment['idle_cpu_ms_per_s'], 0, 0).strip()} ms/s, "
            f"{_cell(deployment['idle_context_switches_per_s'], 0, 0).strip()} switches/s "
            "(every producer connected, none committing)"
        )
    for deployment in deployments.values():
        rows = deployment["rows"]
        failed = sum(row["failed"] for row in rows)
        unknown = sum(row["unknown"] for row in rows)
        errors = [error for row in rows for error in row["errors"]]
        line = f"{_label(deployment)}: {failed} failed, {unknown} unknown transactions"
        print(line + (f" (e.g. {errors[0]})" if errors else ""))
    _print_security_ratios(results)
    sqlite = results["sqlite"]
    print(
        f"\nSQLite WAL synchronous=FULL, one writer, one executemany per transaction: "
        f"{sqlite['transactions_per_s']:,.1f} txn/s"
    )
    headline = results["headline"]
    by_mode = ", ".join(
        f"{_cell(ratio, 0, 2).strip()} ({mode})"
        for mode, ratio in headline["one_node_vs_sqlite"].items()
    )
    print(f"one node {headline['producers']} producers / SQLite: {by_mode}")
    machine = results["machine"]
    start, end = machine["load_average_at_start"][0], machine["load_average_at_end"][0]
    print(
        f"load average {start:.1f} at start, {end:.1f} at end, {machine['cores']} cores "
        "(servers, producers and anything else share them: compare ratios)"
    )


def _label(deployment: dict[str, Any]) -> str:
    return f"{deployment['name']}, security {deployment['security']}"


def _print_block(header: str, deployments: list[dict[str, Any]]) -> None:
    print(header)
    for deployment in deployments:
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
    said = "; ".join(
        f"{deployment['name']}: {' | '.join(sorted(set(deployment['servers_said'])))}"
        for deployment in deployments
    )
    print(f"(the servers' start-up lines say: {said})")


def _print_security_ratios(results: dict[str, Any]) -> None:
    ratios = results["security_ratios"]
    if not ratios:
        return
    counts = list(ratios[0]["transactions_per_s"])
    print("\ntxn/s in one security mode / in a less secured one, same deployment and producers:")
    print(f"{'producers':>36}" + "".join(f"{count:>8}" for count in counts))
    for ratio in ratios:
        label = f"{ratio['numerator']} / {ratio['denominator']}"
        print(
            f"{ratio['name']:<20}{label:>16}"
            + "".join(_cell(ratio["transactions_per_s"][count], 8, 2) for count in counts)
        )
