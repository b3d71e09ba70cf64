"""The embedded and SQLite contenders of ``python -m bench`` (``bench.e2e``) with tiny
sizes: each runs and reports positive figures, and the embedded broker's data stays in
the directory it was given. Nothing here compares speeds."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any

import pytest
from checkout import ROOT

TINY = {"transactions": 2, "warmup_transactions": 1}


@pytest.fixture
def e2e(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The bench.e2e modules; the benchmarks are imported from the checkout, as
    ``python -m bench`` run in it does (they are not installed with the package)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return {
        name: importlib.import_module(f"bench.e2e.{name}")
        for name in ("embedded", "sqlite_baseline", "workload", "runner")
    }


def _check_figures(figures: dict[str, float], names: set[str]) -> None:
    assert names <= set(figures), figures
    for name in names:
        assert math.isfinite(figures[name]) and figures[name] > 0, (name, figures)


def test_embedded_contenders_report_positive_figures(e2e: dict[str, Any], tmp_path: Path) -> None:
    workload = e2e["workload"].Workload(**TINY)
    seen: list[tuple[str, int, int]] = []
    results = e2e["embedded"].measure_embedded(
        tmp_path, workload, lambda *update: seen.append(update)
    )
    assert set(results) == {"embedded", "embedded_batch"}
    for figures in results.values():
        _check_figures(
            figures, {"records_per_s", "mib_per_s", "elapsed_s", "commit_p50_ms", "commit_p99_ms"}
        )
    assert ("embedded", 3, 3) in seen and ("embedded-batch", 3, 3) in seen
    assert (tmp_path / "embedded-data").is_dir()
    assert {path.name for path in tmp_path.iterdir()} == {"embedded-data"}


@pytest.mark.parametrize("per_row", [False, True], ids=["executemany", "execute"])
def test_sqlite_contenders_report_positive_figures(
    e2e: dict[str, Any], tmp_path: Path, per_row: bool
) -> None:
    workload = e2e["workload"].Workload(**TINY)
    figures = e2e["sqlite_baseline"].run_sqlite(
        tmp_path, workload, workload.records_per_transaction, per_row=per_row
    )
    _check_figures(figures, {"records_per_s", "mib_per_s", "elapsed_s"})


def test_records_per_transaction_is_checked_and_sets_the_goal(e2e: dict[str, Any]) -> None:
    import argparse

    runner = e2e["runner"]
    assert runner.records_per_transaction("4000") == 4000
    for wrong in ("1001", "0", "-4"):
        with pytest.raises(argparse.ArgumentTypeError, match="multiple of 4"):
            runner.records_per_transaction(wrong)
    assert runner.goal_vs_plain(1000) == 0.8
    assert runner.goal_vs_plain(4000) == 0.9


def test_each_run_in_a_work_dir_starts_empty(e2e: dict[str, Any], tmp_path: Path) -> None:
    """A second run with the same --work-dir failed on a topic the first had left there:
    each run gets a folder of its own inside it, kept; without one, a temporary directory
    is removed afterwards."""
    work_directory = e2e["runner"].work_directory
    work = tmp_path / "work"
    made = []
    for _ in range(2):
        with work_directory(str(work), "twinlog-bench-") as directory:
            assert not any(directory.iterdir())
            (directory / "data").write_text("left")
            made.append(directory)
    assert made[0] != made[1] and all(directory.parent == work for directory in made)
    assert all((directory / "data").exists() for directory in made)
    with work_directory(None, "twinlog-bench-") as temporary:
        (temporary / "data").write_text("left")
    assert not temporary.exists()
