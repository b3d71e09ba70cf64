"""The timeout settings (Kafka's rules) and the deadline of a call, without a server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    DiskFullError,
    InvalidConfigError,
    RequestTimedOutError,
)
from twinlog.rpc.client import Producer
from twinlog.rpc.client.call_deadline import deadline_at, request_timeout_s
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.client.timeouts import DELIVERY_TIMEOUT_MS_DEFAULT, resolve_delivery_timeout_ms

ADDRESS = "127.0.0.1:1"  # never contacted: the checks come first


def test_a_delivery_timeout_below_linger_plus_request_is_refused_naming_both() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        Producer(ADDRESS, linger_ms=100, delivery_timeout_ms=1_000, request_timeout_ms=1_000)
    assert str(caught.value).startswith(
        "producer config delivery_timeout_ms is 1000, expected at least linger_ms (100) + "
        "request_timeout_ms (1000) = 1100: "
    )


def test_the_default_delivery_timeout_grows_to_fit_as_kafka_s_does() -> None:
    assert resolve_delivery_timeout_ms(None, 5, 30_000) == DELIVERY_TIMEOUT_MS_DEFAULT
    assert resolve_delivery_timeout_ms(None, 1_000, 200_000) == 201_000
    assert resolve_delivery_timeout_ms(1_100, 100, 1_000) == 1_100  # exactly the floor


@pytest.mark.parametrize("value", [0, -1, 1.5, "60000"])
def test_default_api_timeout_must_be_positive_milliseconds(value: object) -> None:
    with pytest.raises(InvalidConfigError, match="default_api_timeout_ms"):
        Producer(ADDRESS, default_api_timeout_ms=value)  # type: ignore[arg-type]


def test_a_request_takes_what_is_left_of_its_call_s_deadline() -> None:
    assert request_timeout_s(30.0) == 30.0  # no call deadline: the request's own
    with deadline_at(time.monotonic() + 2.0):
        assert 1.5 < request_timeout_s(30.0) <= 2.0
        assert request_timeout_s(0.5) == 0.5
        with deadline_at(time.monotonic() + 60.0):  # a nested call cannot extend it
            assert request_timeout_s(30.0) <= 2.0
    with deadline_at(time.monotonic() - 0.1), pytest.raises(RequestTimedOutError):
        request_timeout_s(30.0)  # passed: nothing is sent


def test_a_call_without_answers_times_out_naming_itself_after_its_timeout() -> None:
    def unreachable() -> None:
        raise BrokerUnavailableError("UNAVAILABLE: connection refused")

    policy = RetryPolicy(timeout_ms=60_000, backoff_ms=20, backoff_max_ms=50)
    started_s = time.monotonic()
    with pytest.raises(RequestTimedOutError) as caught:
        call_with_retry(policy, unreachable, "commit_transaction()", timeout_ms=400)
    elapsed_s = time.monotonic() - started_s
    assert 0.3 <= elapsed_s < 1.0, elapsed_s
    message = str(caught.value)
    assert message.startswith("commit_transaction() did not complete within its timeout of 400")
    assert "BrokerUnavailableError" in message and "call it again" in message
    assert isinstance(caught.value.__cause__, BrokerUnavailableError)
    assert caught.value.retriable


def test_a_call_the_server_keeps_refusing_raises_the_server_s_answer() -> None:
    def full() -> None:
        raise DiskFullError("disk full")

    policy = RetryPolicy(timeout_ms=60_000, backoff_ms=20, backoff_max_ms=50)
    with pytest.raises(DiskFullError):
        call_with_retry(policy, full, "init_transactions()", timeout_ms=200)


def test_each_attempt_runs_under_the_call_s_deadline() -> None:
    seen: list[float] = []

    def observe() -> str:
        seen.append(request_timeout_s(30.0))
        return "ok"

    assert call_with_retry(RetryPolicy(), observe, "observe", timeout_ms=1_000) == "ok"
    assert 0.5 < seen[0] <= 1.0
    assert call_with_retry(RetryPolicy(), observe, "observe") == "ok"
    assert seen[1] == 30.0


def test_admin_and_consumer_retry_for_as_long_as_their_api_timeout_unless_given_a_policy() -> None:
    # A shorter retry budget than default_api_timeout_ms gave up with the last raw error
    # (30 s by default) before the call's own deadline could say it timed out.
    from twinlog.rpc.client import Admin, Consumer, RetryPolicy

    with Admin("127.0.0.1:1", default_api_timeout_ms=90_000) as admin:
        assert admin.retry.timeout_ms == 90_000
    with Consumer("127.0.0.1:1", default_api_timeout_ms=90_000) as consumer:
        assert consumer.retry.timeout_ms == 90_000
    with Admin("127.0.0.1:1", retry=RetryPolicy(timeout_ms=5_000)) as admin:
        assert admin.retry.timeout_ms == 5_000


@pytest.mark.parametrize(
    "settings",
    [
        {"linger_ms": "5"},
        {"linger_ms": None},
        {"linger_ms": -1},
        {"max_block_ms": "x"},
        {"batch_bytes": 0},
        {"buffer_bytes_max": 1.5},
        {"request_timeout_ms": "5"},
    ],
    ids=lambda settings: "-".join(f"{k}={v!r}" for k, v in settings.items()),
)
def test_a_bad_setting_is_one_clear_config_error_naming_it(settings: dict) -> None:
    with pytest.raises(InvalidConfigError, match=next(iter(settings))):
        Producer("127.0.0.1:1", **settings)


def test_a_bad_call_timeout_is_a_config_error(tmp_path: Path) -> None:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path / "data") as broker, Producer(broker, "bad-timeout") as producer:
        with pytest.raises(InvalidConfigError, match="timeout_ms"):
            producer.init_transactions(timeout_ms="x")  # type: ignore[arg-type]


def test_a_call_inside_another_ends_at_the_enclosing_deadline() -> None:
    # A consumer's position lookup makes one call per partition, each with its own
    # 60 s; the lookup as a whole must end at its own deadline, not (N+1) x 60 s.
    def unreachable() -> None:
        raise BrokerUnavailableError("no server")

    started_s = time.monotonic()
    with deadline_at(started_s + 0.3), pytest.raises(RequestTimedOutError):
        call_with_retry(RetryPolicy(), unreachable, "list_offset", timeout_ms=60_000)
    assert time.monotonic() - started_s < 2
