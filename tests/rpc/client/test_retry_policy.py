"""``RetryPolicy``'s pauses are the one backoff policy's (``engine.base.backoff``) with its
own numbers: Kafka's retry.backoff.ms doubling to retry.backoff.max.ms, +-20%."""

from __future__ import annotations

import dataclasses

from twinlog.engine.base.backoff import Backoff
from twinlog.rpc.client.retry import RetryPolicy


def test_a_policy_s_pauses_come_from_its_backoff() -> None:
    policy = RetryPolicy(timeout_ms=5_000, backoff_ms=20, backoff_max_ms=300)
    assert policy.backoff == Backoff(20, 300, jitter=0.2)
    assert dataclasses.replace(policy, backoff_max_ms=900).backoff == Backoff(20, 900)


def test_a_pause_stays_within_its_jitter_and_never_passes_the_longest() -> None:
    policy = RetryPolicy(backoff_ms=50, backoff_max_ms=1_000)
    for attempt in range(1, 5):
        base = 50 * 2 ** (attempt - 1)
        assert all(0.8 * base <= policy.pause_ms(attempt) <= 1.2 * base for _ in range(200))
    assert all(800 <= policy.pause_ms(12) <= 1_000 for _ in range(200))


def test_policies_with_the_same_numbers_are_equal() -> None:
    assert RetryPolicy(backoff_ms=10) == RetryPolicy(backoff_ms=10)
    assert RetryPolicy(backoff_ms=10) != RetryPolicy(backoff_ms=20)
    assert "backoff=" not in repr(RetryPolicy())
