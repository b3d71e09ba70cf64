"""``cpu_affinity``: the setting's three forms, and every thread of a process pinned.

Pinning is process-wide, so it is tried in a child process, never in the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from twinlog.engine.base.cpu_affinity import (
    chosen_cpus,
    format_cpu_list,
    is_cpu_affinity,
    parse_cpu_list,
)

TWO = frozenset({0, 1})


def test_cpu_lists_read_and_written_as_linux_does() -> None:
    assert parse_cpu_list("0") == {0}
    assert parse_cpu_list("0,2-3") == {0, 2, 3}
    assert parse_cpu_list(" 1 , 4-5") == {1, 4, 5}
    for text in ("", "a", "3-1", "1-", "-1", "0,,1", "one"):
        assert parse_cpu_list(text) is None, text
    assert format_cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert format_cpu_list({3}) == "3"
    assert all(is_cpu_affinity(text) for text in ("one", "all", "0", "0-1,3"))
    assert not any(is_cpu_affinity(text) for text in ("One", "some", "", "1-0"))


def test_one_takes_the_turn_th_cpu_round_the_allowed_ones_from_the_last() -> None:
    assert chosen_cpus("one", 0, TWO) == {1}  # a single node
    assert chosen_cpus("one", 1, TWO) == {0}
    assert chosen_cpus("one", 3, TWO) == {0}  # brokers 1, 2, 3 on CPUs 0, 1, 0
    assert chosen_cpus("one", 2, frozenset({4, 6, 9})) == {4}  # counted among the allowed
    assert chosen_cpus("all", 5, TWO) is None
    assert chosen_cpus("1", 0, TWO) == {1}


def test_a_list_beyond_the_allowed_cpus_is_refused_saying_which() -> None:
    with pytest.raises(ValueError, match=r"names CPU 2-3, which this process may not use: it "
                       r"may use 0-1"):  # fmt: skip
        chosen_cpus("0-3", 0, TWO)
    with pytest.raises(ValueError, match="is not one, all, or a list of CPUs"):
        chosen_cpus("most", 0, TWO)


PINNED = textwrap.dedent(
    """
    import json, os, sys, threading
    from twinlog.engine.base.cpu_affinity import pin_threads
    before = threading.Event(); release = threading.Event()
    def wait():
        before.set(); release.wait(10)
    early = threading.Thread(target=wait); early.start(); before.wait(10)
    said = pin_threads(sys.argv[1], int(sys.argv[2]))
    late = threading.Thread(target=release.wait, args=(10,)); late.start()
    tasks = {
        name: sorted(os.sched_getaffinity(int(name))) for name in os.listdir("/proc/self/task")
    }
    release.set(); early.join(); late.join()
    print(json.dumps({"said": said, "tasks": tasks}))
    """
)


def _pinned(setting: str, turn: int) -> dict[str, object]:
    run = subprocess.run(
        [sys.executable, "-c", PINNED, setting, str(turn)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    answer: dict[str, object] = json.loads(run.stdout)
    return answer


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux's sched_setaffinity")
def test_every_thread_is_pinned_those_before_and_those_after() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    one = _pinned("one", 1)
    tasks = one["tasks"]
    assert isinstance(tasks, dict) and len(tasks) == 3  # the main thread, early and late
    expected = [allowed[::-1][1 % len(allowed)]]
    assert all(cpus == expected for cpus in tasks.values()), tasks
    assert f"cpu: one CPU, {expected[0]} of {format_cpu_list(allowed)}" in str(one["said"])
    every = _pinned("all", 1)
    every_tasks = every["tasks"]
    assert isinstance(every_tasks, dict)
    assert all(cpus == allowed for cpus in every_tasks.values()), every_tasks
    assert "cpu_affinity=all" in str(every["said"])
