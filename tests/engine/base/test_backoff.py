"""``Backoff``: pauses that grow by the multiplier up to a ceiling the jitter never passes,
the same pauses from the same seed."""

from __future__ import annotations

import random
import re

import pytest

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import InvalidConfigError


def test_pauses_double_from_the_first_up_to_the_ceiling() -> None:
    backoff = Backoff(50, 1_000, jitter=0)
    assert [backoff.delay_ms(n) for n in range(1, 8)] == [50, 100, 200, 400, 800, 1_000, 1_000]
    assert backoff.delay_s(3) == 0.2


def test_another_multiplier_grows_by_it() -> None:
    backoff = Backoff(10, 1_000, multiplier=3, jitter=0)
    assert [backoff.delay_ms(n) for n in range(1, 7)] == [10, 30, 90, 270, 810, 1_000]


def test_any_number_of_retries_stays_at_the_ceiling() -> None:
    """A completion that fails for hours counts thousands of retries: no overflow."""
    assert Backoff(10, 30_000, jitter=0).delay_ms(1_000_000) == 30_000
    assert Backoff(10, 30_000).delay_ms(10**9) <= 30_000


def test_jitter_stays_within_its_bounds_and_below_the_ceiling() -> None:
    backoff = Backoff(50, 1_000, jitter=0.2)
    rng = random.Random(1)
    for attempt in range(1, 5):  # below the ceiling: 50 * 2 ** (n - 1), +-20%
        base = 50 * 2 ** (attempt - 1)
        pauses = [backoff.delay_ms(attempt, rng) for _ in range(500)]
        assert all(0.8 * base <= pause <= 1.2 * base for pause in pauses)
        assert min(pauses) < 0.85 * base and max(pauses) > 1.15 * base  # spread, not fixed
    at_ceiling = [backoff.delay_ms(9, rng) for _ in range(500)]
    assert all(800 <= pause <= 1_000 for pause in at_ceiling)
    assert min(at_ceiling) < 850


def test_the_same_seed_gives_the_same_pauses() -> None:
    backoff = Backoff(50, 1_000)

    def pauses(seed: int) -> list[float]:
        rng = random.Random(seed)
        return [backoff.delay_ms(n, rng) for n in range(1, 10)]

    assert pauses(7) == pauses(7)
    assert pauses(7) != pauses(8)


def test_a_first_pause_above_the_ceiling_is_the_ceiling() -> None:
    assert Backoff(5_000, 1_000, jitter=0).delay_ms(1) == 1_000
    assert Backoff(0, 1_000).delay_ms(5) == 0
    assert Backoff(100, 100, jitter=0).delay_ms(3) == 100


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"initial_ms": -1, "max_ms": 10}, "backoff initial_ms is -1, expected a number 0 or more"),
        ({"initial_ms": 1, "max_ms": -10}, "backoff max_ms is -10, expected a number 0 or more"),
        (
            {"initial_ms": 1, "max_ms": 10, "multiplier": 0.5},
            "multiplier is 0.5, expected a number 1",
        ),
        (
            {"initial_ms": 1, "max_ms": 10, "jitter": 1.0},
            "jitter is 1.0, expected a number 0..1 (1",
        ),
        ({"initial_ms": 1, "max_ms": 10, "jitter": -0.1}, "jitter is -0.1, expected a number 0..1"),
        ({"initial_ms": "1", "max_ms": 10}, "initial_ms is '1', expected a number 0 or more"),
    ],
)
def test_a_policy_that_makes_no_sense_is_refused(arguments: dict[str, float], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        Backoff(**arguments)


def test_the_edges_are_taken() -> None:
    assert Backoff(0, 0, multiplier=1, jitter=0).delay_ms(3) == 0
    assert Backoff(1, 2, jitter=0.99).jitter == 0.99


def test_retries_are_counted_from_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        Backoff(50, 1_000).delay_ms(0)


def test_a_policy_is_a_value() -> None:
    assert Backoff(50, 1_000) == Backoff(50, 1_000)
    assert Backoff(50, 1_000) != Backoff(50, 1_000, jitter=0)


def test_the_jitter_leaves_the_random_modules_state_alone() -> None:
    """Retry loops run on background threads (clients, fetchers); drawing from the shared
    ``random`` state there would change it under whoever manages it, and Hypothesis
    warns (an error here) when it changes during an example."""
    random.seed(7)
    state = random.getstate()
    delays = {Backoff(50, 1_000).delay_ms(2) for _ in range(20)}
    assert random.getstate() == state
    assert len(delays) > 1  # still jittered
