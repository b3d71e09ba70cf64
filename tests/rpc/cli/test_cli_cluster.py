"""``twinlog cluster describe|up`` and ``topics create --replication-factor`` without a
cluster: usage errors, help, and clear errors within the timeout when ZooKeeper or the
brokers are not there. (A real cluster: tests/system/test_cluster_clients.py.)"""

from __future__ import annotations

import time

import pytest
from rpc_fakes import fake_server

from twinlog.engine.zookeeper.local_server import free_loopback_port
from twinlog.rpc.cli.main import main


def test_describe_needs_exactly_one_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "describe"]) == 2
    assert main(["cluster", "describe", "--zookeeper", "h:1/x", "--server", "h:2"]) == 2
    assert "one of --zookeeper CONNECT or --server" in capsys.readouterr().err


def test_help_ends_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["cluster", "describe"], ["cluster", "up"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        assert "example:\n  twinlog cluster" in capsys.readouterr().out


def test_an_unreachable_zookeeper_is_one_error_line_within_the_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_loopback_port()
    started = time.monotonic()
    status = main(
        ["cluster", "describe", "--zookeeper", f"127.0.0.1:{port}/twinlog/x",
         "--timeout-request-ms", "1000"]
    )  # fmt: skip
    assert status == 1 and time.monotonic() - started < 5
    error = capsys.readouterr().err
    assert error.startswith("error: ZooKeeperUnavailableError:") and f"127.0.0.1:{port}" in error


def test_unreachable_brokers_are_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    ports = [free_loopback_port(), free_loopback_port()]
    bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports)
    started = time.monotonic()
    assert main(["cluster", "describe", "--server", bootstrap]) == 1
    assert time.monotonic() - started < 5
    assert f"error: BrokerUnavailableError: cannot reach {bootstrap}" in capsys.readouterr().err


def test_describe_a_single_node_server(capsys: pytest.CaptureFixture[str]) -> None:
    with fake_server() as (broker, address):
        broker.create_topic("orders", 2)
        assert main(["cluster", "describe", "--server", address]) == 0
    out = capsys.readouterr().out
    assert out.startswith("single-node server (not a cluster)")
    rows = [line.split() for line in out.splitlines() if line.startswith("orders ")]
    assert rows == [["orders", str(p), "0", "0", "0", "0", "0"] for p in (0, 1)]


def test_replication_factor_is_a_topic_setting_given_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with fake_server() as (broker, address):
        status = main(
            ["topics", "create", "t", "--replication-factor", "2",
             "--config", "replication.factor=3", "--server", address]
        )  # fmt: skip
        assert status == 2 and "give one" in capsys.readouterr().err
        with pytest.raises(SystemExit) as refused:
            main(["topics", "create", "t", "--replication-factor", "0", "--server", address])
        assert refused.value.code == 2 and "must be > 0" in capsys.readouterr().err
        assert (
            main(["topics", "create", "t", "--replication-factor", "3", "--server", address]) == 0
        )
        assert broker.configs["t"]["replication.factor"] == "3"
    assert "(replication factor 3)" in capsys.readouterr().out
