"""ConfigRules: each rule's refusal is one line naming the config, key, value and what is
allowed; unknown keys are refused with the nearest known ones; the table must name
every field."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from config_support import refusal as config_refusal

from twinlog.engine.base.config_rules import (
    NON_NEGATIVE,
    POSITIVE,
    ConfigRules,
    Flag,
    Integer,
    Number,
    OneOf,
    Optional,
    Port,
    Text,
    unknown_key,
)
from twinlog.engine.base.errors import InvalidConfigError

RULES = ConfigRules(
    "sample config",
    {
        "size_bytes": Integer(16, 1024),
        "retention_ms": Integer(0, 100, minus_one="unlimited"),
        "threads": Integer(0, minus_one="auto"),
        "interval_ms": POSITIVE,
        "lag_ms": NON_NEGATIVE,
        "ratio": Number(0.0, 1.0),
        "jitter": Number(0.0, 1.0, largest_excluded=True),
        "policy": OneOf(("fast", "safe")),
        "fsync": Flag(),
        "port": Port(any_port=True),
        "metrics_port": Port(any_port=True, minus_one="none"),
        "password": Text(lambda text: len(text) >= 8, "at least 8 characters", secret=True),
    },
    free=("host",),
    aliases={"size.bytes": "size_bytes", "max.size.bytes": "size_bytes"},
    loose_keys=True,
    refused_keys={"size.records": "sizes are in bytes: use size.bytes"},
)


@dataclass(frozen=True)
class Sample:
    size_bytes: int = 64
    retention_ms: int = -1
    threads: int = -1
    interval_ms: int = 10
    lag_ms: int = 0
    ratio: float = 0.5
    jitter: float = 0.2
    policy: str = "safe"
    fsync: bool = True
    port: int = 0
    metrics_port: int = -1
    password: str = field(default="long enough", repr=False)
    host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        RULES.check(self)


def refusal(**changes: object) -> str:
    return config_refusal(Sample, **changes)


def test_the_defaults_pass() -> None:
    Sample()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"size_bytes": 15}, "sample config size_bytes (size.bytes) is 15, expected 16..1024"),
        ({"size_bytes": 1025}, "sample config size_bytes (size.bytes) is 1025, expected 16..1024"),
        ({"size_bytes": True}, "size_bytes (size.bytes) is True, expected an integer 16..1024"),
        ({"size_bytes": "64"}, "size_bytes (size.bytes) is '64', expected an integer 16..1024"),
        ({"retention_ms": -2}, "retention_ms is -2, expected 0..100 or -1 (unlimited)"),
        ({"retention_ms": 101}, "retention_ms is 101, expected 0..100 or -1 (unlimited)"),
        ({"threads": -2}, "threads is -2, expected 0 or more, or -1 (auto)"),
        ({"interval_ms": 0}, "sample config interval_ms is 0, expected 1 or more"),
        ({"interval_ms": 1.5}, "interval_ms is 1.5, expected an integer 1 or more"),
        ({"lag_ms": -1}, "lag_ms is -1, expected 0 or more"),
        ({"ratio": 1.5}, "ratio is 1.5, expected a number 0.0..1.0"),
        ({"ratio": -0.1}, "ratio is -0.1, expected a number 0.0..1.0"),
        ({"ratio": "half"}, "ratio is 'half', expected a number 0.0..1.0"),
        ({"ratio": False}, "ratio is False, expected a number 0.0..1.0"),
        ({"jitter": 1.0}, "jitter is 1.0, expected a number 0.0..1.0 (1.0 excluded)"),
        ({"policy": "quick"}, "sample config policy is 'quick', expected one of fast, safe"),
        ({"fsync": "yes"}, "fsync is 'yes', expected true or false"),
        ({"port": 65536}, "port is 65536, expected a TCP port 0..65535 (0 picks a free one)"),
        ({"port": -1}, "port is -1, expected a TCP port 0..65535"),
        ({"metrics_port": -2}, "metrics_port is -2, expected a TCP port 0..65535"),
        ({"password": "short"}, "password is 5 characters long (not shown), expected at least 8"),
    ],
)
def test_each_rule_refuses_in_one_line(changes: dict[str, object], message: str) -> None:
    assert message in refusal(**changes)


def test_minus_one_is_taken_only_where_a_rule_allows_it() -> None:
    assert Sample(retention_ms=-1, threads=-1, metrics_port=-1).metrics_port == -1
    assert "or -1 (none)" in refusal(metrics_port=-2)
    assert "-1" not in refusal(interval_ms=-1).split("expected")[1]


def test_the_edges_of_each_range_are_taken() -> None:
    Sample(size_bytes=16, retention_ms=100, ratio=1.0, jitter=0.0, port=65535, lag_ms=0)
    Sample(size_bytes=1024, ratio=0, metrics_port=0)


def test_a_secret_is_never_quoted() -> None:
    assert "short" not in refusal(password="short").replace("5 characters", "")
    assert "seven77" not in refusal(password="seven77")


def test_keys_map_to_fields_through_aliases_loose_spellings_and_renames() -> None:
    assert RULES.field_of("size.bytes") == "size_bytes"
    assert RULES.field_of("max.size.bytes") == "size_bytes"
    assert RULES.field_of("interval-ms") == "interval_ms"
    assert RULES.field_of("metrics.port") == "metrics_port"


def test_text_is_read_as_each_field_s_rule_reads_it() -> None:
    values = RULES.values_from(
        {"size.bytes": " 128 ", "ratio": "0.25", "fsync": "False", "policy": "fast", "host": "h"}
    )
    assert values == {
        "size_bytes": 128,
        "ratio": 0.25,
        "fsync": False,
        "policy": "fast",
        "host": "h",
    }
    assert Sample(**values).size_bytes == 128  # type: ignore[arg-type]


def test_text_that_cannot_be_read_is_refused_quoted() -> None:
    values = RULES.values_from({"size.bytes": "lots"})
    with pytest.raises(InvalidConfigError, match=re.escape("is 'lots', expected an integer 16..")):
        Sample(**values)  # type: ignore[arg-type]


def test_an_unknown_key_is_refused_with_the_nearest_known_ones() -> None:
    with pytest.raises(InvalidConfigError) as refused:
        RULES.values_from({"intervall_ms": "5"})
    message = str(refused.value)
    assert message.startswith("unknown sample config key 'intervall_ms' (did you mean interval_ms")
    assert "; known keys: fsync, host, interval_ms" in message and "\n" not in message


def test_an_unknown_key_like_none_lists_every_key() -> None:
    message = str(unknown_key("server config", "nope", ["port", "host"]))
    assert message == "unknown server config key 'nope'; known keys: host, port"


def test_a_refused_key_says_why() -> None:
    with pytest.raises(InvalidConfigError, match=r"'size\.records' is not supported: sizes are in"):
        RULES.field_of("size.records")


def test_a_label_names_a_field_in_refusals() -> None:
    labelled = ConfigRules(
        "sample config", RULES.rules, RULES.free, labels={"lag_ms": "lag_ms (x.y)"}
    )
    assert (
        str(labelled.refuse("lag_ms", 7, "less"))
        == "sample config lag_ms (x.y) is 7, expected less"
    )


def test_a_rule_between_fields_is_refused_in_the_same_words() -> None:
    message = str(RULES.refuse("lag_ms", 7, "at most interval_ms (5)"))
    assert message == "sample config lag_ms is 7, expected at most interval_ms (5)"
    assert "is 'x'," in str(RULES.refuse("policy", "x", "one of a"))


def test_a_table_that_misses_a_field_is_a_programming_error() -> None:
    @dataclass(frozen=True)
    class Grown:
        size_bytes: int = 64
        added_ms: int = 5  # no rule

        def __post_init__(self) -> None:
            ConfigRules("grown config", {"size_bytes": POSITIVE}).check(self)

    with pytest.raises(TypeError, match=r"no rule for \['added_ms'\]"):
        Grown()


def test_a_rule_for_a_field_that_went_is_a_programming_error() -> None:
    @dataclass(frozen=True)
    class Shrunk:
        size_bytes: int = 64

        def __post_init__(self) -> None:
            ConfigRules("shrunk config", {"size_bytes": POSITIVE, "gone_ms": POSITIVE}).check(self)

    with pytest.raises(TypeError, match=r"no field for \['gone_ms'\]"):
        Shrunk()


def test_an_optional_rule_takes_none_and_says_what_none_means() -> None:
    rule = Optional(POSITIVE, "the default")
    assert rule.accepts(None) and rule.accepts(5)
    assert not rule.accepts(0) and not rule.accepts("5")
    assert rule.allowed(0) == "None (the default) or 1 or more"
    assert rule.allowed("5") == "None (the default) or an integer 1 or more"
    assert rule.from_text("7") == 7
