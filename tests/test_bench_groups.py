"""``python -m bench.groups`` (consumer group rebalances and overhead) at a tiny size against
a real server: every phase runs and reports figures that say what the group did. Nothing
here compares speeds: each check is on what happened (every partition owned, a join moves
only the joiner's share, the killed member removed no sooner than its session allows, a
stable group heartbeats at the stable interval), never on how fast."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from types import ModuleType

import pytest
from checkout import ROOT

pytestmark = pytest.mark.crash  # SIGKILLs a member process (so slow too: about 15 s)

MEMBERS, PARTITIONS, OVERHEAD_MEMBERS = 2, 4, 3
SESSION_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS = 2_000, 500


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The benchmark, imported from the checkout as ``python -m bench.groups`` run in it
    does (the benchmarks are not installed with the package)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench.groups")


def positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def test_every_phase_reports_what_the_group_did(groups: ModuleType, tmp_path: Path) -> None:
    settings = groups.Settings(
        members=MEMBERS,
        partitions=PARTITIONS,
        rounds=1,
        kill_rounds=1,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        overhead_members=OVERHEAD_MEMBERS,
        idle_seconds=0.5,
        overhead_seconds=2.0,
        commit_seconds=0.5,
    )
    said: list[str] = []
    results = groups.run(settings, tmp_path, said.append)
    assert said, "no progress lines"

    # Joins and leaves settle (the waits raise otherwise), and a join is incremental: only
    # the joiner's share moves (4 partitions over 3 members: 1), in one group epoch.
    assert positive(results["form_s"])
    assert len(results["join_s"]) == 1 and positive(results["join_s"][0])
    assert len(results["leave_s"]) == 1 and positive(results["leave_s"][0])
    assert results["join_moved"] == [PARTITIONS // (MEMBERS + 1)]
    assert results["join_epochs"] == [1]

    # The killed member is removed by its session timeout (not sooner than the coordinator
    # may: half of it is a bound no slow machine breaks), then the others take its share.
    [kill] = results["kills"]
    assert positive(kill["total_s"]) and positive(kill["expiry_s"])
    assert kill["reassign_s"] >= 0 and kill["beat_before_kill_s"] >= 0
    assert kill["removed_after_beat_s"] >= SESSION_TIMEOUT_MS / 1000 / 2
    assert math.isclose(kill["total_s"], kill["expiry_s"] + kill["reassign_s"], abs_tol=1e-6)

    # A stable group heartbeats at its interval: never at the reconciling 200 ms (2.5 times
    # as often here); a busy machine only makes the rate lower. No members, no heartbeats.
    overhead = results["overhead"]
    assert overhead["idle"]["heartbeats"] == 0
    assert overhead["stable"]["heartbeats"] > 0
    assert overhead["heartbeats_per_s"] <= 1.5 * overhead["expected_heartbeats_per_s"]
    assert overhead["expected_heartbeats_per_s"] == OVERHEAD_MEMBERS * 1000 / HEARTBEAT_INTERVAL_MS
    assert overhead["stable"]["seconds"] >= 2.0  # whole intervals

    # Every member committed.
    assert overhead["members_that_committed"] == OVERHEAD_MEMBERS
    assert overhead["commits"] >= OVERHEAD_MEMBERS
    assert positive(overhead["commit_p50_ms"])
    assert overhead["commit_p99_ms"] >= overhead["commit_p50_ms"]
    for window in ("idle", "stable", "committing"):
        assert overhead[window]["cpu_percent"] >= 0
