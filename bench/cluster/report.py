"""The results as ratios, a printed table, and the machine they were taken on."""

from __future__ import annotations

import os
from typing import Any

PRELIMINARY = "same machine for everything; other work on it skews absolute figures: compare ratios"


def machine_note() -> dict[str, Any]:
    cores = os.cpu_count() or 0
    return {
        "cores": cores,
        "note": f"{cores} cores serve three brokers, ZooKeeper and the client "
        "(all replicas share them: CPU, not disk, bounds RF 3)",
        "load_average_at_start": os.getloadavg(),
    }


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")


def median_round(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """The round whose total (fault -> client's first acknowledgement) is the median, so
    that its phases add up to its total; with an even count, the lower middle one."""
    ordered = sorted(rounds, key=lambda r: r["client_first_ack_s"])
    middle = ordered[(len(ordered) - 1) // 2]
    return {
        **middle["phases_s"],
        "client_first_ack_s": middle["client_first_ack_s"],
        "client_write_pause_s": middle["client_write_pause_s"],
    }


def add_ratios(results: dict[str, Any]) -> None:
    single, cluster = results["single_node"], results["cluster"]
    ratios = {
        "plain_records_per_s_rf3_vs_single": _ratio(
            cluster["plain"]["records_per_s"], single["plain"]["records_per_s"]
        ),
        "transactional_records_per_s_rf3_vs_single": _ratio(
            cluster["transactional"]["records_per_s"], single["transactional"]["records_per_s"]
        ),
        "transactional_vs_plain_rf3": _ratio(
            cluster["transactional"]["records_per_s"], cluster["plain"]["records_per_s"]
        ),
        "transactional_vs_plain_single": _ratio(
            single["transactional"]["records_per_s"], single["plain"]["records_per_s"]
        ),
    }
    for kind, name in (
        ("latency", "produce_p50_ms"),
        ("latency", "produce_p99_ms"),
        ("transactional", "begin_p50_ms"),
        ("transactional", "send_and_flush_p50_ms"),
        ("transactional", "commit_p50_ms"),
        ("transactional", "commit_p99_ms"),
    ):
        ratios[f"{name}_rf3_vs_single"] = _ratio(cluster[kind][name], single[kind][name])
    no_fsync = results.get("no_replica_fsync")
    if no_fsync:
        ratios["plain_records_per_s_fsync_vs_no_fsync"] = _ratio(
            cluster["plain"]["records_per_s"], no_fsync["plain"]["records_per_s"]
        )
        ratios["produce_p50_ms_fsync_vs_no_fsync"] = _ratio(
            cluster["latency"]["produce_p50_ms"], no_fsync["latency"]["produce_p50_ms"]
        )
    results["ratios"] = ratios
    results["failover_sigkill_median_s"] = median_round(cluster["failover_sigkill"])
    results["failover_sigterm_median_s"] = median_round(cluster["failover_sigterm"])
    for kind in ("sigkill", "sigterm"):
        totals = [r["client_first_ack_s"] for r in cluster[f"failover_{kind}"]]
        results[f"failover_{kind}_range_s"] = [min(totals), max(totals)]


def _row(label: str, single: float, cluster: float, ratio: float, digits: int = 0) -> str:
    return f"  {label:<38}{single:>13,.{digits}f}{cluster:>15,.{digits}f}{ratio:>13.2f}"


def print_report(results: dict[str, Any]) -> None:
    single, cluster, ratios = results["single_node"], results["cluster"], results["ratios"]
    settings, machine = results["settings"], results["machine"]
    load_start, load_end = machine["load_average_at_start"][0], machine["load_average_at_end"][0]
    print(f"\ntwinlog cluster figures: {PRELIMINARY}")
    print(
        f"machine: {machine['note']}; 1-minute load {load_start:.1f} at start, "
        f"{load_end:.1f} at end; run took {results['elapsed_s']:.0f} s"
    )
    head = f"{'single node':>13}{'RF 3 acks=all':>15}{'RF 3/single':>13}"
    records = settings["records_per_transaction"]
    print(f"\n{'throughput, 1 KiB records, 1 partition':<40}{head}")
    print(
        _row(
            "plain records/s",
            single["plain"]["records_per_s"],
            cluster["plain"]["records_per_s"],
            ratios["plain_records_per_s_rf3_vs_single"],
        )
    )
    print(
        _row(
            f"transactional records/s ({records}/txn)",
            single["transactional"]["records_per_s"],
            cluster["transactional"]["records_per_s"],
            ratios["transactional_records_per_s_rf3_vs_single"],
        )
    )
    print(
        _row(
            "transactions/s",
            single["transactional"]["transactions_per_s"],
            cluster["transactional"]["transactions_per_s"],
            ratios["transactional_records_per_s_rf3_vs_single"],
        )
    )
    print(
        f"  {'transactional / plain records/s':<38}"
        f"{ratios['transactional_vs_plain_single']:>13.2f}"
        f"{ratios['transactional_vs_plain_rf3']:>15.2f}"
    )
    print(f"\n{'latency, ms':<40}{head}")
    for kind, name, label in (
        ("latency", "produce_p50_ms", "produce p50 (1 record)"),
        ("latency", "produce_p99_ms", "produce p99"),
        ("transactional", "begin_p50_ms", "transaction: begin p50"),
        ("transactional", "send_and_flush_p50_ms", f"  send {records} records + flush p50"),
        ("transactional", "commit_p50_ms", "  commit p50"),
        ("transactional", "commit_p99_ms", "  commit p99"),
    ):
        print(
            _row(
                label,
                single[kind][name],
                cluster[kind][name],
                ratios[f"{name}_rf3_vs_single"],
                digits=1,
            )
        )
    _print_failovers(results, settings)
    _print_coordinator_failovers(cluster.get("coordinator_failover", []), settings)
    _print_catch_up(cluster["catch_up"])
    no_fsync = results.get("no_replica_fsync")
    if no_fsync:
        _print_fsync(cluster, no_fsync)
    print()


def _print_failovers(results: dict[str, Any], settings: dict[str, Any]) -> None:
    rounds = settings["failover_rounds"]
    kill, term = results["failover_sigkill_median_s"], results["failover_sigterm_median_s"]
    which = f"the median of {rounds} rounds" if rounds > 1 else "one round"
    print(
        f"\nleader failover after SIGKILL, s ({which}; ZooKeeper session timeout "
        f"{settings['session_timeout_ms']} ms, tick {settings['zookeeper_tick_ms']} ms)"
    )
    for name, label in (
        ("session_expiry", "session expiry (-> registration gone)"),
        ("controller_reaction", "controller (-> new leader written)"),
        ("promotion_and_first_write", "promotion (-> new leader's first ack)"),
        ("client_refresh", "client refresh (-> client's first ack)"),
        ("client_first_ack_s", "total: kill -> first acknowledged produce"),
        ("client_write_pause_s", "client's write pause"),
    ):
        print(f"  {label:<44}{kill[name]:>8.3f}")
    share = kill["session_expiry"] / kill["client_first_ack_s"] if kill["client_first_ack_s"] else 0
    print(f"  (the session expiry is {share:.0%} of the total)")
    low, high = results["failover_sigkill_range_s"]
    print(f"  (totals of all rounds: {low:.3f} .. {high:.3f})")
    print(f"\nleader failover after SIGTERM (controlled shutdown), s ({which})")
    for name, label in (
        ("controller_reaction", "controller (stop -> new leader written)"),
        ("promotion_and_first_write", "promotion (-> new leader's first ack)"),
        ("client_refresh", "client refresh (-> client's first ack)"),
        ("client_first_ack_s", "total: stop -> first ack by the new leader"),
        ("client_write_pause_s", "client's write pause"),
    ):
        print(f"  {label:<44}{term[name]:>8.3f}")
    low, high = results["failover_sigterm_range_s"]
    print(f"  (totals of all rounds: {low:.3f} .. {high:.3f})")


def _print_coordinator_failovers(rounds: list[dict[str, Any]], settings: dict[str, Any]) -> None:
    if not rounds:
        return
    which = ", ".join(str(p) for p in sorted({r["journal_partition"] for r in rounds}))
    print(
        f"\ntransaction coordinator failover after SIGKILL, s (coordinator {which}'s broker; "
        f"one round per count; session timeout {settings['session_timeout_ms']} ms)"
    )

    def line(label: str, cells: list[str]) -> None:
        print(f"  {label:<44}" + "".join(f"{cell:>12}" for cell in cells))

    line(
        "open transactions at the coordinator (K)", [f"{r['open_transactions']:,}" for r in rounds]
    )
    for name, label in (
        ("session_expiry", "session expiry (-> registration gone)"),
        ("controller_reaction", "controller (-> new __txn_journal leader)"),
        ("coordinator_load", "load (-> new coordinator's first answer)"),
        ("client_commit", "client (-> its first commit answered)"),
    ):
        line(label, [f"{r['phases_s'][name]:.3f}" for r in rounds])
    line(
        "total: kill -> first committed transaction", [f"{r['first_commit_s']:.3f}" for r in rounds]
    )
    line("the client's commit pause", [f"{r['commit_pause_s']:.3f}" for r in rounds])
    logged: list[dict[str, Any]] = [r["load_log"] for r in rounds if "load_log" in r]
    if len(logged) == len(rounds):
        line(
            "load, broker log: barrier, replicas",
            [f"{e['wait_before_replay_s']:.3f}" for e in logged],
        )
        line("load, broker log: replay and redo", [f"{e['replay_s']:.3f}" for e in logged])
    line("still open after it", [f"{r['still_open']['ongoing']:,}" for r in rounds])
    line("sample committed after it", [f"{r['sample_committed']}/{r['sample']}" for r in rounds])
    line("opening the K transactions took", [f"{r['open_s']:.1f}" for r in rounds])


def _print_catch_up(catch_up: dict[str, Any]) -> None:
    mib = catch_up["bytes_behind"] / (1 << 20)
    print("\nfollower catch-up (SIGTERM a follower, produce, start it again)")
    print(
        f"  {mib:.1f} MiB behind, caught up {catch_up['catch_up_s']:.2f} s after registering: "
        f"{catch_up['catch_up_mib_per_s']:.1f} MiB/s"
    )
    print(
        f"  start -> registered {catch_up['spawn_to_registered_s']:.2f} s; registered -> back "
        f"in the ISR {catch_up['registered_to_isr_s']:.2f} s"
    )


def _print_fsync(cluster: dict[str, Any], no_fsync: dict[str, Any]) -> None:
    print(f"\n{'follower fsync (replica_fsync), RF 3':<40}{'on':>13}{'off':>15}{'on/off':>13}")
    print(
        _row(
            "plain records/s",
            cluster["plain"]["records_per_s"],
            no_fsync["plain"]["records_per_s"],
            _ratio(cluster["plain"]["records_per_s"], no_fsync["plain"]["records_per_s"]),
        )
    )
    for name, label in (("produce_p50_ms", "produce p50 ms"), ("produce_p99_ms", "produce p99 ms")):
        print(
            _row(
                label,
                cluster["latency"][name],
                no_fsync["latency"][name],
                _ratio(cluster["latency"][name], no_fsync["latency"][name]),
                digits=1,
            )
        )
