"""``twinlog cluster describe|up`` and ``topics create --replication-factor`` without a
cluster: usage errors, help, and clear errors within the timeout when ZooKeeper or the
brokers are not there. (A real cluster: tests/system/test_cluster_clients.py.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from rpc_fakes import fake_server

from twinlog.engine.base.cluster_metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.cli import cluster_up
from twinlog.rpc.cli.local_zookeeper import free_loopback_port
from twinlog.rpc.cli.main import main
from twinlog.rpc.client.cluster_report import ClusterReport


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
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
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
    # kazoo's "Connection dropped" per retry reached a user's terminal before that line
    # (here pytest's log capture took them: what it caught is what a user would have seen).
    assert [r.getMessage() for r in caplog.records if r.name.startswith("kazoo")] == []


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


def _report(
    brokers: int,
    leader_id: int,
    unreachable: dict[str, str],
    internal_topics: tuple[str, ...] = ("__consumer_offsets", "__txn_journal"),
) -> ClusterReport:
    partition = PartitionMetadata(0, leader_id, 0, (1, 2), (1, 2))
    return ClusterReport(
        ClusterMetadata(
            "c1",
            1,
            tuple(BrokerEndpoint(n, "127.0.0.1", 9000 + n) for n in range(1, brokers + 1)),
            tuple(TopicMetadata(name, (partition,)) for name in internal_topics),
        ),
        unreachable=unreachable,
    )


def test_cluster_up_prints_the_bootstrap_list_only_once_every_leader_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Brokers serve before the internal topics are created and their leaderships handed
    out: a client sent to a leader named in the metadata was told "not the leader" (the
    cluster-up system test's describe, on a busy machine). ``cluster up`` waits for
    registered brokers, the internal topics, leaders, and leaders that answer."""
    not_yet = {"127.0.0.1:9001": "NotLeaderOrFollowerError: not its leader yet"}
    answers = iter(
        [
            _report(1, 1, {}),  # one of two brokers registered
            _report(2, 1, {}, ("__txn_journal",)),  # __consumer_offsets not created yet
            _report(2, -1, {}),  # no leader yet
            _report(2, 1, not_yet),  # the leader does not know it leads yet
            _report(2, 1, {}),
        ]
    )
    asked: list[str] = []

    def from_servers(servers: str, options: object, topics: list[str]) -> ClusterReport:
        asked.append(servers)
        return next(answers)

    monkeypatch.setattr(cluster_up, "from_servers", from_servers)
    monkeypatch.setattr(cluster_up, "READY_PROBE_INTERVAL_S", 0.0)
    children = [SimpleNamespace(address=f"127.0.0.1:{9000 + n}") for n in (1, 2)]
    cluster_up.wait_until_ready(children, threading.Event())  # type: ignore[arg-type]
    assert asked == ["127.0.0.1:9001,127.0.0.1:9002"] * 5
    # Never created (too few brokers for their replication factor): named at the deadline.
    monkeypatch.setattr(cluster_up, "from_servers", lambda *a: _report(2, 1, {}, ()))
    monkeypatch.setattr(cluster_up, "CLUSTER_READY_TIMEOUT_S", 0.2)
    with pytest.raises(TwinlogError, match=r"__consumer_offsets, __txn_journal not created yet"):
        cluster_up.wait_until_ready(children, threading.Event())  # type: ignore[arg-type]
    # Never ready: a typed error naming what is missing, at the deadline.
    monkeypatch.setattr(cluster_up, "from_servers", lambda *a: _report(2, 1, not_yet))
    monkeypatch.setattr(cluster_up, "CLUSTER_READY_TIMEOUT_S", 0.2)
    with pytest.raises(TwinlogError, match=r"did not become ready within .*not its leader yet"):
        cluster_up.wait_until_ready(children, threading.Event())  # type: ignore[arg-type]


def test_cluster_up_replicates_at_most_once_per_broker_unless_configured() -> None:
    """The broker's default replication factor is 3: a cluster of one or two brokers at
    that would never create its internal topics (no transaction journal, no group
    offsets), and ``cluster up`` would wait for them in vain."""
    assert cluster_up.with_replication_factor([], 1) == ["default_replication_factor=1"]
    assert cluster_up.with_replication_factor(["a=b"], 2) == [
        "a=b",
        "default_replication_factor=2",
    ]
    assert cluster_up.with_replication_factor([], 5) == ["default_replication_factor=3"]
    given = ["default.replication.factor=2"]
    assert cluster_up.with_replication_factor(given, 5) == given


def test_a_restarted_broker_keeps_its_ports_and_stops_restarting_after_the_limit() -> None:
    arguments = ["--data-dir", "d", "--port", "0", "--kafka-listener", "127.0.0.1:0"]
    assert cluster_up.pinned_ports(arguments, "127.0.0.1:40001", "127.0.0.1:40002") == [
        "--data-dir", "d", "--port", "40001", "--kafka-listener", "127.0.0.1:40002",
    ]  # fmt: skip
    assert cluster_up.pinned_ports(["--port", "0"], "127.0.0.1:40001", "") == ["--port", "40001"]
    child = cluster_up.BrokerChild(1, Path("/nonexistent/broker-1"), arguments)
    now_s = 1000.0
    child.restarted_at_s = [now_s - 1] * (cluster_up.RESTARTS_MAX - 1)
    assert child.may_restart(now_s)
    child.restarted_at_s.append(now_s)
    assert not child.may_restart(now_s)  # RESTARTS_MAX within the window: it stays down
    assert child.may_restart(now_s + cluster_up.RESTART_WINDOW_S + 1)  # the window moved on
