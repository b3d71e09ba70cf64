"""A coordinator load as the new leader's own log tells it (``twinlog serve`` logs each
line with its local time to the millisecond):

    transaction coordinator N: absent (epoch -1) -> loading (epoch E) on lead
    transaction coordinator N (epoch E): loading failed (...); retrying       (0 or more)
    transaction coordinator N loaded at epoch E: R journal records replayed
        (committed end C), T transactions in flight, X ms

The replay (X ms) starts once the promotion barrier is passed and the in-sync replicas
hold the whole journal partition; so ``lead -> loaded - X`` is that wait, and ``X`` the
replay and redo. Times are seconds after the fault (``fault_wall_s``, ``time.time()``).
None when the lines are not found (another log format): the phase's figures do not
depend on them.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) ")
STAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def _wall_s(line: str) -> float | None:
    found = STAMP.match(line)
    if found is None:
        return None
    return datetime.strptime(found.group(1), STAMP_FORMAT).timestamp()


def coordinator_load_from_log(
    log_path: Path, journal_partition: int, epoch: int, fault_wall_s: float
) -> dict[str, Any] | None:
    if not log_path.exists():
        return None
    n = journal_partition
    lead = re.compile(
        rf"transaction coordinator {n}: \w+ \(epoch -?\d+\) -> loading \(epoch {epoch}\)"
    )
    failed = re.compile(rf"transaction coordinator {n} \(epoch {epoch}\): loading failed \((.*)\)")
    loaded = re.compile(
        rf"transaction coordinator {n} loaded at epoch {epoch}: (\d+) journal records replayed "
        r"\(committed end (\d+)\), (\d+) transactions in flight, (\d+) ms"
    )
    lead_s: float | None = None
    failures: list[str] = []
    for line in log_path.read_text(errors="replace").splitlines():
        wall_s = _wall_s(line)
        if wall_s is None or wall_s < fault_wall_s - 1:  # 1 s: the stamps' rounding, and more
            continue
        if lead_s is None and lead.search(line):
            lead_s = wall_s - fault_wall_s
        elif (found := failed.search(line)) is not None:
            failures.append(found.group(1))
        elif lead_s is not None and (found := loaded.search(line)) is not None:
            replay_s = int(found.group(4)) / 1000
            loaded_s = wall_s - fault_wall_s
            return {
                "lead_seen_s": lead_s,
                "loaded_s": loaded_s,
                "wait_before_replay_s": max(0.0, loaded_s - replay_s - lead_s),
                "replay_s": replay_s,
                "records_replayed": int(found.group(1)),
                "transactions_in_flight": int(found.group(3)),
                "load_failures": failures,
            }
    return None
