"""ProducerConfig: the Producer's settings, checked by their rules table and refused in one
line naming the setting, the value and what is allowed; Producer() refuses through it
before it connects."""

from __future__ import annotations

import re

import pytest
from config_support import assert_defaults_are_the_config_s
from config_support import refusal as config_refusal

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.client import Producer
from twinlog.rpc.client.producer_config import ProducerConfig

ADDRESS = "127.0.0.1:1"  # never contacted: the checks come first


def refusal(**changes: object) -> str:
    return config_refusal(ProducerConfig, **changes)


def test_the_defaults_pass_and_are_the_producer_s() -> None:
    # request_timeout_ms: the connection's (ConnectionOptions)
    assert_defaults_are_the_config_s(ProducerConfig, Producer.__init__, {"request_timeout_ms"})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"compression": "brotli"},
            "producer config compression is 'brotli', expected one of zstd, lz4, snappy, gzip, none",
        ),
        ({"linger_ms": -1}, "producer config linger_ms is -1, expected 0 or more"),
        ({"linger_ms": "5"}, "producer config linger_ms is '5', expected an integer 0 or more"),
        ({"batch_bytes": 0}, "producer config batch_bytes is 0, expected 1 or more"),
        ({"batch_bytes_max": 0}, "producer config batch_bytes_max is 0, expected 1 or more"),
        ({"buffer_bytes_max": 1.5}, "buffer_bytes_max is 1.5, expected an integer 1 or more"),
        ({"max_block_ms": -1}, "producer config max_block_ms is -1, expected 0 or more"),
        ({"max_block_ms": None}, "max_block_ms is None, expected an integer 0 or more"),
        (
            {"delivery_timeout_ms": 0},
            "producer config delivery_timeout_ms is 0, expected None (the default) or 1 or more",
        ),
        (
            {"transaction_timeout_ms": "60000"},
            "transaction_timeout_ms is '60000', expected None (the default) or an integer 1 or",
        ),
        ({"default_api_timeout_ms": 0}, "default_api_timeout_ms is 0, expected 1 or more"),
        ({"request_timeout_ms": True}, "request_timeout_ms is True, expected an integer 1 or"),
    ],
)
def test_a_bad_setting_is_refused_in_one_line_naming_it(
    changes: dict[str, object], message: str
) -> None:
    assert message in refusal(**changes)


def test_the_buffer_holds_a_batch_and_the_limit_is_at_least_the_aim() -> None:
    assert refusal(batch_bytes=4096, buffer_bytes_max=1024) == (
        "producer config buffer_bytes_max is 1024, expected at least batch_bytes (4096): "
        "the buffer holds one batch at least"
    )
    assert refusal(batch_bytes=4096, batch_bytes_max=1024).startswith(
        "producer config batch_bytes_max is 1024, expected at least batch_bytes (4096): "
    )
    ProducerConfig(batch_bytes=4096, batch_bytes_max=4096, buffer_bytes_max=4096)


def test_a_delivery_timeout_covers_a_linger_and_a_request() -> None:
    message = refusal(linger_ms=100, request_timeout_ms=1_000, delivery_timeout_ms=1_099)
    assert message.startswith(
        "producer config delivery_timeout_ms is 1099, expected at least linger_ms (100) + "
        "request_timeout_ms (1000) = 1100: a record must be able to wait its linger"
    )
    assert ProducerConfig(linger_ms=100, request_timeout_ms=1_000, delivery_timeout_ms=1_100)


def test_none_leaves_the_timeouts_to_their_defaults() -> None:
    config = ProducerConfig(delivery_timeout_ms=None, transaction_timeout_ms=None)
    assert config.delivery_timeout_ms is config.transaction_timeout_ms is None
    assert ProducerConfig(transaction_timeout_ms=1).transaction_timeout_ms == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"compression": "lz5"}, "producer config compression is 'lz5', expected one of"),
        ({"linger_ms": -1}, "producer config linger_ms is -1, expected 0 or more"),
        ({"batch_bytes": 64, "buffer_bytes_max": 32}, "buffer_bytes_max is 32, expected at"),
        ({"transaction_timeout_ms": 0}, "transaction_timeout_ms is 0, expected None"),
        ({"request_timeout_ms": 0}, "connection option request_timeout_ms is 0, expected 1 or"),
    ],
)
def test_the_producer_refuses_through_its_config_before_it_connects(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        Producer(ADDRESS, **settings)  # type: ignore[arg-type]
