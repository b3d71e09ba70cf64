"""Keeping a server's threads on one CPU: the GIL handed over on one core, not across two.

A broker is many Python threads (gRPC's handlers and produce streams, the journal's
writer, the copies, the replica fetchers) handing the one interpreter lock and their
conditions to each other hundreds of times per transaction. On several cores each
hand-over wakes a thread on another core (an inter-processor interrupt, a cold cache)
while the thread that let go runs on: the kernel's scheduler took a quarter of the
server's CPU (``perf``: ``finish_task_switch``, ``_raw_spin_unlock_irqrestore``). On
one core the woken thread runs when the other blocks, and the interpreter's work is
the same, since the lock lets one thread run at a time anyway.

Measured on the development machine (2 cores), ``python -m bench.scale``, 8 producers
on one node: 7.0-7.3 ms of server CPU and 167-176 context switches per transaction with
the server on one CPU, against 12.1-12.4 ms and 564-593 without, and a third more
transactions a second; three brokers at 4 producers (each on a CPU of its own turn):
67 against 83 ms of CPU per transaction (bench/README.md has the runs).

What the one CPU costs: the work that runs without the lock (gRPC's network and TLS
threads, compression, CRCs, the kernel's side of a write) shares that core too, so a
server that would use more than a core of it should be given more (``cpu_affinity``).

``cpu_affinity`` (a server setting of ``twinlog serve``):

    one       one CPU of those the process may use (its cgroup's, taskset's): the
              ``turn``-th, counting round from the last (a single node's turn is 0, a
              cluster broker's its broker id, so brokers started on one machine spread
              over its CPUs; from the last, as the first is where many systems handle
              their interrupts). The default.
    all       every CPU the process may use: left as the system set it.
    0,2-3     these CPUs (Linux's list format), each one the process may use.

It is a process-wide choice, so the engine never makes it on its own: ``twinlog serve``
applies it at start-up, before the broker starts its threads (each later thread inherits
its creator's CPUs); a thread already running is moved too. Where the system cannot pin
threads (not Linux) it does nothing and says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

ONE = "one"
ALL = "all"
CPU_AFFINITY_DEFAULT = ONE
DESCRIPTION = "one, all, or a list of CPUs such as 0,2-3"


def parse_cpu_list(text: str) -> frozenset[int] | None:
    """Linux's CPU list format ("0", "0,2-3") as a set of CPUs; None if it is not one."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            return None
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            return None
        cpus.update(range(low, high + 1))
    return frozenset(cpus) if cpus else None


def is_cpu_affinity(text: str) -> bool:
    """Does ``text`` say a ``cpu_affinity``? (the config rule's test)"""
    return text in (ONE, ALL) or parse_cpu_list(text) is not None


def format_cpu_list(cpus: Iterable[int]) -> str:
    """A set of CPUs in Linux's list format, runs joined: {0, 1, 2, 5} -> "0-2,5"."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)


def chosen_cpus(setting: str, turn: int, allowed: frozenset[int]) -> frozenset[int] | None:
    """The CPUs ``setting`` gives the process, of the ``allowed`` ones; None: leave them.
    ValueError naming what is wrong for a list naming CPUs the process may not use (or a
    setting that is none of the three forms)."""
    if not allowed:
        raise ValueError("this process may run on no CPU at all")
    if setting == ALL:
        return None
    if setting == ONE:
        from_last = sorted(allowed, reverse=True)
        return frozenset({from_last[turn % len(from_last)]})
    listed = parse_cpu_list(setting)
    if listed is None:
        raise ValueError(f"cpu_affinity {setting!r} is not {DESCRIPTION}")
    outside = listed - allowed
    if outside:
        raise ValueError(
            f"cpu_affinity {setting!r} names CPU {format_cpu_list(outside)}, which this process "
            f"may not use: it may use {format_cpu_list(allowed)} (its cgroup's or taskset's); "
            "name some of those, or 'one' or 'all'"
        )
    return listed


def pin_threads(setting: str, turn: int = 0) -> str:
    """Apply ``setting`` to every thread of this process (``chosen_cpus``); return what
    was done, for the start line. ValueError as ``chosen_cpus`` raises it."""
    if not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self/task"):
        return "cpu: every CPU (this system cannot pin threads)"
    allowed = frozenset(os.sched_getaffinity(0))
    cpus = chosen_cpus(setting, turn, allowed)
    if cpus is None:
        return f"cpu: every CPU it may use ({format_cpu_list(allowed)}; cpu_affinity=all)"
    for name in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(name), cpus)
        except ProcessLookupError:
            continue  # that thread ended meanwhile
    count = "one CPU" if len(cpus) == 1 else f"{len(cpus)} CPUs"
    return (
        f"cpu: {count}, {format_cpu_list(cpus)} of {format_cpu_list(allowed)} "
        f"(cpu_affinity={setting}; 'all' to use every one)"
    )
