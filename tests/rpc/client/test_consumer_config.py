"""ConsumerConfig: the Consumer's settings, checked by their rules table and refused in one
line naming the setting, the value and what is allowed; Consumer() refuses through it
before it connects."""

from __future__ import annotations

import re

import pytest
from config_support import assert_defaults_are_the_config_s
from config_support import refusal as config_refusal

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.client import Consumer
from twinlog.rpc.client.consumer_config import ConsumerConfig

ADDRESS = "127.0.0.1:1"  # never contacted: the checks come first


def refusal(**changes: object) -> str:
    return config_refusal(ConsumerConfig, **changes)


def test_the_defaults_pass_and_are_the_consumer_s() -> None:
    assert_defaults_are_the_config_s(ConsumerConfig, Consumer.__init__)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"auto_offset_reset": "smallest"},
            "consumer config auto_offset_reset is 'smallest', expected one of earliest, latest, "
            "none",
        ),
        ({"fetch_max_bytes": 0}, "consumer config fetch_max_bytes is 0, expected 1 or more"),
        ({"fetch_max_wait_ms": -1}, "consumer config fetch_max_wait_ms is -1, expected 0 or more"),
        ({"max_poll_records": 0}, "consumer config max_poll_records is 0, expected 1 or more"),
        ({"max_poll_records": "10"}, "max_poll_records is '10', expected an integer 1 or more"),
        (
            {"enable_auto_commit": "false"},
            "consumer config enable_auto_commit is 'false', expected true or false",
        ),
        ({"auto_commit_interval_ms": 0}, "auto_commit_interval_ms is 0, expected 1 or more"),
        ({"session_timeout_ms": -5}, "session_timeout_ms is -5, expected 1 or more"),
        ({"max_poll_interval_ms": 1.5}, "max_poll_interval_ms is 1.5, expected an integer 1 or"),
        ({"metadata_max_age_ms": None}, "metadata_max_age_ms is None, expected an integer 1 or"),
        (
            {"consumer_timeout_ms": -1},
            "consumer config consumer_timeout_ms is -1, expected None (never) or a number 0 or "
            "more",
        ),
        ({"consumer_timeout_ms": "1000"}, "consumer_timeout_ms is '1000', expected None (never)"),
        ({"default_api_timeout_ms": 0}, "default_api_timeout_ms is 0, expected 1 or more"),
    ],
)
def test_a_bad_setting_is_refused_in_one_line_naming_it(
    changes: dict[str, object], message: str
) -> None:
    assert message in refusal(**changes)


def test_a_static_member_needs_a_group() -> None:
    assert refusal(group_instance_id="host-1") == (
        "consumer config group_instance_id is 'host-1', expected None without a group: pass "
        "group_id= too"
    )
    assert ConsumerConfig(group_id="billing", group_instance_id="host-1").group_id == "billing"


def test_iteration_may_stop_after_any_number_of_milliseconds_or_never() -> None:
    assert ConsumerConfig(consumer_timeout_ms=None).consumer_timeout_ms is None
    assert ConsumerConfig(consumer_timeout_ms=0).consumer_timeout_ms == 0
    assert ConsumerConfig(consumer_timeout_ms=float("inf")).consumer_timeout_ms == float("inf")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"auto_offset_reset": "smallest"}, "consumer config auto_offset_reset is 'smallest'"),
        ({"max_poll_records": 0}, "consumer config max_poll_records is 0, expected 1 or more"),
        ({"enable_auto_commit": "maybe"}, "enable_auto_commit is 'maybe', expected true or"),
        ({"group_instance_id": "host-1"}, "group_instance_id is 'host-1', expected None without"),
        ({"default_api_timeout_ms": "x"}, "default_api_timeout_ms is 'x', expected an integer"),
    ],
)
def test_the_consumer_refuses_through_its_config_before_it_connects(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        Consumer(ADDRESS, **settings)  # type: ignore[arg-type]


def test_a_flag_given_as_text_is_read_as_the_rule_reads_text() -> None:
    """A config mapping's values are text, as Kafka's properties are: "false" is read as
    False (bool("false") would have turned auto-commit on); a keyword is a bool."""
    with Consumer(ADDRESS, "billing", config={"enable.auto.commit": "false"}) as consumer:
        assert consumer.enable_auto_commit is False
    with Consumer(ADDRESS, "billing", config={"enable.auto.commit": "TRUE"}) as consumer:
        assert consumer.enable_auto_commit is True
    with pytest.raises(InvalidConfigError, match="enable_auto_commit is 'maybe', expected true"):
        Consumer(ADDRESS, "billing", config={"enable.auto.commit": "maybe"})
    with pytest.raises(InvalidConfigError, match="enable_auto_commit is 'false', expected true"):
        Consumer(ADDRESS, "billing", enable_auto_commit="false")  # type: ignore[arg-type]
