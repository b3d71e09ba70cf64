"""A real ``twinlog serve --metrics-port 0``: its /metrics scraped and parsed with the
Prometheus client's parser, its health service, its request and audit logs.

The server has tokens and ACLs: alice writes and reads her topic, bob may not create
topics, ops administers. Health checks pass without a token.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from server_process import ServerProcess, run_cli

from twinlog.engine.base.errors import AuthenticationError, AuthorizationError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.slow]  # starts a server process

ALICE = "alice-token-0f3a8c2e7b91d"
OPS = "ops-token-6b1d9e4a2c7f05"
BOB = "bob-token-9c2e5a7f1d3b84"
ACL = """
alice write metered
alice read metered
alice read group:billing
alice write transactional-id:alice-*
ops all *
ops all transactional-id:*
"""
TOPIC = "metered"
RECORDS = 5
COMMITTED_OFFSET = 2  # billing's committed position: lag RECORDS - 2
METRICS_URL = re.compile(r"metrics on (http://\S+/metrics)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("observed")
    (directory / "tokens").write_text(f"{ALICE} alice\n{OPS} ops\n{BOB} bob\n")
    (directory / "acl").write_text(ACL)
    with ServerProcess(
        directory / "data",
        "--metrics-port", "0",
        "--log-level", "debug",  # any case; DEBUG writes the request log
        "--tokens-file", str(directory / "tokens"),
        "--acl-file", str(directory / "acl"),
    ) as process:  # fmt: skip
        yield process


@pytest.fixture(scope="module")
def traffic(server: ServerProcess) -> ServerProcess:
    """A transactional produce, a consume and a group commit, once for the module."""
    with Admin(server.address, token=OPS) as admin:
        admin.create_topic(TOPIC, 1)
    with Producer(server.address, "alice-loader", token=ALICE) as producer:
        producer.init_transactions()
        with producer.transaction():
            for index in range(RECORDS):
                producer.send(TOPIC, f"record {index}".encode(), partition=0)
    with Consumer(
        server.address, group_id="billing", enable_auto_commit=False, token=ALICE
    ) as consumer:
        consumer.assign([(TOPIC, 0)])
        consumer.seek_to_beginning()
        values: list[bytes | None] = []
        deadline = time.monotonic() + 10
        while len(values) < RECORDS and time.monotonic() < deadline:
            values.extend(record.value for record in consumer.poll(500))
        assert len(values) == RECORDS
        consumer.commit({TopicPartition(TOPIC, 0): COMMITTED_OFFSET})
    return server


def scrape(server: ServerProcess) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Samples by family name, parsed by prometheus_client's parser."""
    found = METRICS_URL.search(server.log())
    assert found, server.log()
    assert found.group(1).startswith("http://127.0.0.1:")  # bound to the server's host
    with urllib.request.urlopen(found.group(1), timeout=10) as answer:
        text = answer.read().decode()
    return {
        family.name: [(s.name, s.labels, s.value) for s in family.samples]
        for family in text_string_to_metric_families(text)
    }


def value(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    return sum(v for n, found, v in samples if n == name and labels.items() <= found.items())


def test_metrics_move_with_traffic(traffic: ServerProcess) -> None:
    families = scrape(traffic)
    for name in (
        "twinlog_rpc_requests",
        "twinlog_rpc_duration_seconds",
        "twinlog_rpc_received_bytes",
        "twinlog_rpc_sent_bytes",
        "twinlog_open_transactions",
        "twinlog_oldest_open_transaction_age_seconds",
        "twinlog_commit_latency_seconds",
        "twinlog_apply_latency_seconds",
        "twinlog_fsync_duration_seconds",
        "twinlog_journal_used_bytes",
        "twinlog_journal_map_bytes",
        "twinlog_transaction_journal_bytes",
        "twinlog_log_size_bytes",
        "twinlog_log_end_offset",
        "twinlog_consumer_group_lag",
        "twinlog_under_replicated_partitions",
    ):
        assert name in families, (name, sorted(families))
    requests = families["twinlog_rpc_requests"]
    producing = "twinlog.v1.Producing"
    produced = value(requests, "twinlog_rpc_requests_total", service=producing, method="Produce")
    streamed = value(
        requests, "twinlog_rpc_requests_total", service=producing, method="ProduceStream"
    )
    assert produced + streamed >= 1
    for method in ("InitProducer", "BeginTransaction", "CommitTransaction"):
        assert value(requests, "twinlog_rpc_requests_total", method=method, code="OK") >= 1
    assert value(requests, "twinlog_rpc_requests_total", method="Fetch", code="OK") >= 1
    durations = families["twinlog_rpc_duration_seconds"]
    assert value(durations, "twinlog_rpc_duration_seconds_count", method="CommitTransaction") >= 1
    assert value(families["twinlog_rpc_received_bytes"], "twinlog_rpc_received_bytes_total") > 0
    assert value(families["twinlog_rpc_sent_bytes"], "twinlog_rpc_sent_bytes_total") > 0
    commits = families["twinlog_commit_latency_seconds"]
    assert value(commits, "twinlog_commit_latency_seconds_count") >= 1
    applies = families["twinlog_apply_latency_seconds"]
    assert value(applies, "twinlog_apply_latency_seconds_count") >= 1
    fsyncs = families["twinlog_fsync_duration_seconds"]
    assert value(fsyncs, "twinlog_fsync_duration_seconds_count", kind="log_segment") >= 1
    assert value(fsyncs, "twinlog_fsync_duration_seconds_count", kind="local_journal") >= 1
    ours = {"topic": TOPIC, "partition": "0"}
    assert value(families["twinlog_log_end_offset"], "twinlog_log_end_offset", **ours) == RECORDS
    assert value(families["twinlog_log_size_bytes"], "twinlog_log_size_bytes", **ours) > 0
    lag = families["twinlog_consumer_group_lag"]
    assert value(lag, "twinlog_consumer_group_lag", group="billing", **ours) == (
        RECORDS - COMMITTED_OFFSET
    )
    assert value(families["twinlog_open_transactions"], "twinlog_open_transactions") == 0
    assert value(families["twinlog_journal_used_bytes"], "twinlog_journal_used_bytes") > 0
    under = families["twinlog_under_replicated_partitions"]
    assert value(under, "twinlog_under_replicated_partitions") == 0


def test_the_process_figures_are_the_server_processes(traffic: ServerProcess) -> None:
    """CPU, memory and file descriptors from the metrics library's own collectors: the
    server process's, as /proc has them."""
    families = scrape(traffic)
    assert traffic.process is not None
    pid = traffic.process.pid
    resident = value(families["process_resident_memory_bytes"], "process_resident_memory_bytes")
    rss_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    assert 0.5 < resident / (rss_pages * os.sysconf("SC_PAGE_SIZE")) < 2
    assert value(families["process_cpu_seconds"], "process_cpu_seconds_total") > 0
    assert value(families["process_open_fds"], "process_open_fds") > 3  # a server's sockets
    assert value(families["process_start_time_seconds"], "process_start_time_seconds") > 0
    assert "python_gc_objects_collected" in families and "python_info" in families


def test_health_is_serving_for_every_service_without_a_token(server: ServerProcess) -> None:
    with grpc.insecure_channel(server.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "twinlog.v1.Producing", "twinlog.v1.Consuming"):
            answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, service
        answer = stub.Check(
            health_pb2.HealthCheckRequest(service="twinlog.v1.Administration"), timeout=5
        )
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
        assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


def audit_lines(server: ServerProcess) -> list[str]:
    return [line for line in server.log().splitlines() if "twinlog.audit:" in line]


def wait_for_line(server: ServerProcess, pattern: str) -> str:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in audit_lines(server):
            if re.search(pattern, line):
                return line
        time.sleep(0.05)
    raise AssertionError(
        f"no audit line matches {pattern!r}; audit log:\n" + "\n".join(audit_lines(server))
    )


def test_admin_abort_through_the_cli_is_audited(traffic: ServerProcess) -> None:
    producer = Producer(traffic.address, "alice-hanging", token=ALICE)
    try:
        producer.init_transactions()
        transaction_id = producer.begin_transaction()
        producer.send(TOPIC, b"never read", partition=0).result(timeout=10)
        result = run_cli(
            "txn", "abort", str(transaction_id), "--server", traffic.address, "--token", OPS
        )
        assert result.returncode == 0, result.stderr
        line = wait_for_line(traffic, rf"transaction\.abort .*transaction_id={transaction_id} ")
        assert "principal=ops" in line
        assert "transactional_id=alice-hanging" in line
        assert "outcome=ok" in line
        assert re.search(r"peer=ipv[46]:", line)
    finally:
        producer.close()


def test_topic_changes_are_audited_with_their_principal(traffic: ServerProcess) -> None:
    line = wait_for_line(traffic, rf"topic\.create .*topic={TOPIC} ")
    assert "principal=ops" in line and "partitions=1" in line and "outcome=ok" in line


def test_acl_refusal_and_bad_token_are_audited(server: ServerProcess) -> None:
    with Admin(server.address, token=BOB) as admin:
        with pytest.raises(AuthorizationError):
            admin.create_topic("bobs-topic", 1)
    line = wait_for_line(server, r"acl\.denied principal=bob ")
    assert "action=create" in line and "resource=topic" in line and "name=bobs-topic" in line
    with Admin(server.address, token="not-a-token-of-this-server") as admin:
        with pytest.raises(AuthenticationError):
            admin.list_topics()
    line = wait_for_line(server, r"authentication\.failed ")
    assert "not-a-token-of-this-server" not in server.log()  # never the token itself
    assert "peer=" in line


def test_request_log_has_one_line_per_rpc(traffic: ServerProcess) -> None:
    lines = [line for line in traffic.log().splitlines() if "twinlog.request:" in line]
    commits = [line for line in lines if "method=/twinlog.v1.Producing/CommitTransaction" in line]
    assert commits, "\n".join(lines[-20:])
    assert re.search(
        r"principal=alice peer=\S+ status=OK duration_ms=[\d.]+ bytes_in=0 bytes_out=0", commits[0]
    ), commits[0]
    fetches = [line for line in lines if "/Fetch " in line and "bytes_out=0" not in line]
    assert fetches, "a fetch that returned records logs its bytes"
