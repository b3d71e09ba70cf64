"""The port a cluster broker registers: --advertised-port, else TWINLOG_ADVERTISED_PORT (a
fault test's proxy in front of it), else its own; and the flag as ``twinlog serve`` takes it."""

from __future__ import annotations

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.cli.main import main
from twinlog.rpc.cluster.cluster_member import (
    ADVERTISED_PORT_VARIABLE,
    INTER_BROKER_PORT_VARIABLE,
    registered_port,
)


def test_without_the_variable_the_listening_port_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ADVERTISED_PORT_VARIABLE, raising=False)
    assert registered_port(7071) == 7071


def test_the_variable_names_the_registered_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADVERTISED_PORT_VARIABLE, "41234")
    assert registered_port(7071) == 41234


@pytest.mark.parametrize("text", ["proxy", "0", "70000", "-5"])
def test_a_value_that_is_no_port_is_refused_with_the_variable_named(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv(ADVERTISED_PORT_VARIABLE, text)
    with pytest.raises(InvalidConfigError, match=ADVERTISED_PORT_VARIABLE):
        registered_port(7071)


def test_the_flag_wins_over_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADVERTISED_PORT_VARIABLE, "41234")
    assert registered_port(7071, 9093) == 9093


@pytest.mark.parametrize("flag", ["--advertised-port", "--inter-broker-port"])
@pytest.mark.parametrize("port", ["0", "70000"])
def test_serve_refuses_an_advertised_port_that_is_no_port(flag: str, port: str) -> None:
    with pytest.raises(SystemExit, match=flag):
        main(["serve", "--data-dir", "/nonexistent", "--broker-id", "1", "--zookeeper",
              "127.0.0.1:1", flag, port])  # fmt: skip


def test_the_inter_broker_variable_names_the_inter_broker_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(INTER_BROKER_PORT_VARIABLE, "41235")
    assert registered_port(0, None, INTER_BROKER_PORT_VARIABLE) == 41235
    assert registered_port(7071) == 7071  # the advertised port is another variable
