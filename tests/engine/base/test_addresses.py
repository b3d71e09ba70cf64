"""The one ``HOST:PORT`` parser and the one port range: 1..65535, and 0 (any free port)
only where a listener binds."""

from __future__ import annotations

import re

import pytest

from twinlog.engine.base.addresses import (
    check_port,
    join_host_port,
    parse_host_port,
    parse_port,
)
from twinlog.engine.base.errors import InvalidConfigError


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:9092", ("127.0.0.1", 9092)),
        ("kafka.example.com:9093", ("kafka.example.com", 9093)),
        ("localhost:1", ("localhost", 1)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
        ("[::1]:9092", ("::1", 9092)),
        ("[::]:7071", ("::", 7071)),
        ("[fe80::1%eth0]:7071", ("fe80::1%eth0", 7071)),
        ("::1:9092", ("::1", 9092)),  # unbracketed: what stands before the last colon is IPv6
        (" 127.0.0.1:9092 ", ("127.0.0.1", 9092)),
    ],
)
def test_an_address_is_host_and_port(text: str, address: tuple[str, int]) -> None:
    assert parse_host_port(text, "address") == address


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("127.0.0.1", "no port"),
        ("127.0.0.1:", "no port"),
        ("[::1]", "no port"),
        ("[::1]:", "no port"),
        ("", "no port"),
        (":9092", "no host"),
        ("[]:9092", "no host"),
        ("host:port", "port 'port' is not a number"),
        ("host:-1", "port '-1' is not a number"),
        ("host:²", "port '²' is not a number"),
        ("host:99999", "port must be 1..65535"),
        ("host:0", "port must be 1..65535"),
        ("::1", "an IPv6 host goes in brackets"),  # not host ':' and port 1
        ("fe80::1", "an IPv6 host goes in brackets"),
        ("[::1:9092", "no ']' after the IPv6 host"),
        ("::1]:9092", "a bracket without its pair"),
        ("[::1]x:9092", "'x:9092' after the bracketed host"),
    ],
)
def test_a_refusal_says_what_is_wrong_and_what_to_write(text: str, problem: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        parse_host_port(text, "bootstrap address")
    message = str(refused.value)
    assert message.startswith(f"bootstrap address {text!r}: {problem}")
    assert message.endswith("; write HOST:PORT, e.g. 127.0.0.1:9092 or [::1]:9092")


def test_port_0_is_taken_only_where_a_listener_binds() -> None:
    assert parse_host_port("127.0.0.1:0", "--kafka-listener", any_port=True) == ("127.0.0.1", 0)
    assert parse_host_port("[::]:0", "--kafka-listener", any_port=True) == ("::", 0)
    with pytest.raises(InvalidConfigError, match=re.escape("port must be 0..65535")) as refused:
        parse_host_port("h:65536", "--kafka-listener", any_port=True, example="127.0.0.1:7071")
    assert str(refused.value).endswith(
        "write HOST:PORT, e.g. 127.0.0.1:7071 or [::1]:7071 (port 0 picks a free one)"
    )


@pytest.mark.parametrize("port", [1, 7070, 65535])
def test_a_port_is_1_to_65535(port: int) -> None:
    assert check_port(port, "--advertised-port") == port
    assert check_port(port, "server config port", any_port=True) == port
    assert parse_port(str(port), "TWINLOG_ADVERTISED_PORT") == port


@pytest.mark.parametrize("port", [-1, 0, 65536])
def test_a_port_out_of_range_is_refused_naming_the_setting(port: int) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        check_port(port, "--advertised-port")
    assert str(refused.value) == f"--advertised-port is {port}: give a TCP port, 1..65535"


def test_any_port_takes_0_and_says_so() -> None:
    assert check_port(0, "server config port", any_port=True) == 0
    assert parse_port("0", "port", any_port=True) == 0
    with pytest.raises(InvalidConfigError) as refused:
        check_port(-2, "metrics_port", any_port=True, otherwise="or -1 for none")
    assert str(refused.value) == (
        "metrics_port is -2: give a TCP port, 0..65535 (0 picks a free one), or -1 for none"
    )


@pytest.mark.parametrize("text", ["", "proxy", "0", "70000", "-5", "7e3", "²"])
def test_a_text_that_is_no_port_is_refused(text: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        parse_port(text, "TWINLOG_ADVERTISED_PORT", otherwise="or unset it")
    assert str(refused.value) == (
        f"TWINLOG_ADVERTISED_PORT is {text!r}: give a TCP port, 1..65535, or unset it"
    )


@pytest.mark.parametrize(
    ("host", "port", "written"),
    [
        ("127.0.0.1", 9092, "127.0.0.1:9092"),
        ("kafka.example.com", 1, "kafka.example.com:1"),
        ("::1", 7071, "[::1]:7071"),
        ("[::1]", 7071, "[::1]:7071"),  # already bracketed
    ],
)
def test_an_address_is_written_as_the_parser_reads_it(host: str, port: int, written: str) -> None:
    assert join_host_port(host, port) == written
    assert parse_host_port(written, "address") == (host.strip("[]"), port)
