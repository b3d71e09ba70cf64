"""``RetryPolicy``'s pauses are the one backoff policy's (``engine.base.backoff``) with its
own numbers: Kafka's retry.backoff.ms doubling to retry.backoff.max.ms, +-20%. Its
numbers, and ``ConnectionOptions``', are checked by their rules tables."""

from __future__ import annotations

import dataclasses
import re

import pytest

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.client.connection_options import ConnectionOptions
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


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timeout_ms": 0}, "retry policy timeout_ms is 0, expected 1 or more"),
        ({"backoff_ms": -1}, "retry policy backoff_ms is -1, expected 0 or more"),
        ({"backoff_max_ms": -1}, "retry policy backoff_max_ms is -1, expected 0 or more"),
        ({"timeout_ms": "30000"}, "timeout_ms is '30000', expected an integer 1 or more"),
    ],
)
def test_a_bad_number_is_refused_in_one_line_naming_it(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        RetryPolicy(**changes)  # type: ignore[arg-type]


def test_a_policy_may_retry_at_once() -> None:
    assert RetryPolicy(backoff_ms=0, backoff_max_ms=0).pause_ms(3) == 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"request_timeout_ms": 0}, "connection option request_timeout_ms is 0, expected 1 or"),
        ({"request_timeout_ms": "5"}, "request_timeout_ms is '5', expected an integer 1 or more"),
        ({"tls": "yes"}, "connection option tls is 'yes', expected true or false"),
        ({"tls_cert_file": "c.pem"}, "needs both files: tls_cert_file (--tls-cert) is set"),
    ],
)
def test_connection_options_are_refused_in_one_line_naming_them(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        ConnectionOptions(**changes)  # type: ignore[arg-type]
