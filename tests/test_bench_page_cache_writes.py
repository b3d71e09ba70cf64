"""``python -m bench.page_cache_writes``: it writes what it says, step by step, reports each
step, and leaves no file behind. Nothing here compares speeds."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from checkout import ROOT


@pytest.fixture
def page_cache_writes(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench.page_cache_writes")


def test_each_step_is_a_new_file_of_its_size_and_all_are_deleted(
    page_cache_writes: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    real_unlink = Path.unlink

    def unlink(path: Path, missing_ok: bool = False) -> None:
        sizes.append(path.stat().st_size)
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    steps = page_cache_writes.measure(tmp_path, total_mib=6, step_mib=2)
    assert [step.written_mib for step in steps] == [2, 4, 6]
    assert sizes == [2 << 20] * 3  # every file kept until the end, then deleted
    assert all(step.megabytes_per_s > 0 and step.cpu_s_per_gib >= 0 for step in steps)
    assert list(tmp_path.iterdir()) == []


def test_main_prints_a_line_per_step_and_the_spread(
    page_cache_writes: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        page_cache_writes.main(["--total-mib", "2", "--step-mib", "1", "--dir", str(tmp_path)]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["written", "MiB", "MB/s", "CPU", "s", "per", "GiB"]
    assert [line.split()[0] for line in lines[1:3]] == ["1", "2"]
    assert lines[3].startswith("slowest step at ")
    assert list(tmp_path.iterdir()) == []


def test_refuses_a_step_larger_than_the_total(page_cache_writes: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="step_mib"):
        page_cache_writes.measure(tmp_path, total_mib=1, step_mib=2)
