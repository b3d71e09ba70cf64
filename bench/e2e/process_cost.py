"""What a process spent: CPU time (user and system) and context switches, from /proc.

The benchmark reads the server's before and after each gRPC contender, so every run says
where a transaction's time goes besides its wall time: on this project's two-core
machine the server's CPU per transaction, half of it in the kernel, and its threads
handing work to each other hundreds of times per transaction, are what the throughput
ratios are made of. Linux only; elsewhere ``sample`` returns None and nothing is printed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# /proc/PID/stat fields after the command name: utime and stime are the 12th and 13th
UTIME_FIELD = 11
STIME_FIELD = 12


@dataclass(frozen=True)
class ProcessCost:
    """Totals of one process since it started (all its threads)."""

    user_s: float
    system_s: float
    context_switches: int  # voluntary and involuntary, summed over every thread alive

    def minus(self, earlier: ProcessCost) -> ProcessCost:
        return ProcessCost(
            self.user_s - earlier.user_s,
            self.system_s - earlier.system_s,
            self.context_switches - earlier.context_switches,
        )

    def per(self, units: float) -> dict[str, float]:
        """Per unit of work (a transaction, a thousand records): CPU in ms, switches."""
        return {
            "cpu_ms": (self.user_s + self.system_s) * 1000 / units,
            "user_ms": self.user_s * 1000 / units,
            "system_ms": self.system_s * 1000 / units,
            "context_switches": self.context_switches / units,
        }


def sample(pid: int) -> ProcessCost | None:
    """The process's totals now, or None where /proc does not tell (or it is gone).

    Threads that ended are missing from the switch count (their CPU time stays in the
    process's): the server keeps its threads, so a difference of two samples holds."""
    proc = Path("/proc") / str(pid)
    try:
        stat = (proc / "stat").read_text()
        # The command name is in parentheses and may hold spaces: split after it.
        fields = stat[stat.rindex(")") + 2 :].split()
        user_s = int(fields[UTIME_FIELD]) / CLOCK_TICKS_PER_S
        system_s = int(fields[STIME_FIELD]) / CLOCK_TICKS_PER_S
        switches = 0
        for task in (proc / "task").iterdir():
            try:
                status = (task / "status").read_text()
            except OSError:
                continue  # the thread ended meanwhile
            for line in status.splitlines():
                if "ctxt_switches:" in line:
                    switches += int(line.split(":")[1])
    except (OSError, ValueError, IndexError):
        return None
    return ProcessCost(user_s, system_s, switches)
