"""The broker-wide decompression budget: bounded, released on every exit, never a long wait."""

from __future__ import annotations

import threading
import time

import pytest

from twinlog.engine.base.errors import NotEnoughResourcesError
from twinlog.engine.records.decompression_budget import DecompressionBudget


def test_a_spent_budget_refuses_after_its_wait_as_retriable() -> None:
    budget = DecompressionBudget(bytes_max=100, wait_ms=50)
    with budget.reserve(80):
        assert budget.reserved_bytes == 80
        started = time.monotonic()
        with pytest.raises(NotEnoughResourcesError, match="retry shortly") as refused:
            with budget.reserve(30):
                pass
        assert refused.value.retriable
        assert 0.04 < time.monotonic() - started < 2.0
    assert budget.reserved_bytes == 0


def test_a_reservation_is_released_when_its_block_raises() -> None:
    budget = DecompressionBudget(bytes_max=100, wait_ms=50)
    with pytest.raises(ValueError), budget.reserve(100):
        raise ValueError("the batch did not decode")
    assert budget.reserved_bytes == 0
    with budget.reserve(100):  # the whole budget is free again
        assert budget.reserved_bytes == 100


def test_a_waiter_proceeds_as_soon_as_room_is_released() -> None:
    budget = DecompressionBudget(bytes_max=100, wait_ms=5_000)
    holding = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with budget.reserve(100):
            holding.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(5)
    threading.Timer(0.1, release.set).start()
    started = time.monotonic()
    with budget.reserve(60):
        waited_s = time.monotonic() - started
    thread.join(5)
    assert 0.05 < waited_s < 3.0
    assert budget.reserved_bytes == 0


def test_a_section_larger_than_the_budget_reserves_all_of_it_not_more() -> None:
    budget = DecompressionBudget(bytes_max=100, wait_ms=50)
    with budget.reserve(10_000):
        assert budget.reserved_bytes == 100
