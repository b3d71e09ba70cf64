"""The benchmark's account of a process's CPU and context switches (``bench.e2e.process_cost``):
read from /proc for this very process, it grows with work done and with threads handing
work to each other. Nothing here compares speeds."""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from typing import Any

import pytest
from checkout import ROOT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc is Linux's; elsewhere nothing is sampled"
)


@pytest.fixture
def process_cost(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench.e2e.process_cost")


def test_cpu_and_context_switches_grow_with_work_and_hand_offs(process_cost: Any) -> None:
    before = process_cost.sample(os.getpid())
    started = time.process_time()
    # 200 ms of CPU. /proc counts it in clock ticks (10 ms), sampled: on a busy virtual
    # machine a tick may go to another task or to steal time, so 50 ms once showed as
    # less than 40 in a fast-lane run; half of what was spent is asserted.
    while time.process_time() - started < 0.2:
        pass
    ping, pong = threading.Event(), threading.Event()

    def answer() -> None:
        for _ in range(50):
            ping.wait(5)
            ping.clear()
            pong.set()

    other = threading.Thread(target=answer)
    other.start()
    for _ in range(50):  # each hand-off puts one thread to sleep and wakes the other
        ping.set()
        pong.wait(5)
        pong.clear()
    other.join(5)
    after = process_cost.sample(os.getpid())
    spent = after.minus(before)
    assert spent.user_s + spent.system_s >= 0.1
    assert spent.context_switches >= 50
    per_unit = spent.per(2)
    assert per_unit["cpu_ms"] == pytest.approx((spent.user_s + spent.system_s) * 500)
    assert per_unit["context_switches"] == spent.context_switches / 2


def test_a_process_that_is_gone_gives_none(process_cost: Any) -> None:
    assert process_cost.sample(2**22 + 12345) is None  # above Linux's pid_max default
