"""Metrics, health and the structured logs of an in-process server (no subprocess):
the request observer's counts and statuses, the engine collector, the metrics
endpoint's life cycle, health during shutdown, and the log formats."""

from __future__ import annotations

import io
import json
import logging
import shlex
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from rpc_fakes import FakeBroker

from twinlog.engine.base.errors import CorruptJournalError, UnknownTopicOrPartitionError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.broker_stats import BrokerStats
from twinlog.rpc.client.connection import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.policy.structured_log import FIELDS_ATTRIBUTE, format_pairs, log_event
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.engine_collector import EngineCollector
from twinlog.rpc.server.log_format import JsonFormatter, configure_server_logging
from twinlog.rpc.server.metrics import ServerMetrics, split_method
from twinlog.rpc.server.request_observer import REQUEST_LOGGER
from twinlog.rpc.server.server import RpcServer

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVING = health_pb2.HealthCheckResponse.SERVING


@pytest.fixture
def server() -> Iterator[RpcServer]:
    running = RpcServer(FakeBroker(), ServerConfig(port=0, metrics_port=0))
    running.start()
    try:
        yield running
    finally:
        running.stop(grace_ms=0)


def requests_of(server: RpcServer, method: str, code: str) -> float:
    found = server.metrics.registry.get_sample_value(
        "twinlog_rpc_requests_total",
        {"service": "twinlog.v1.Administration", "method": method, "code": code},
    )
    return found or 0.0


def test_requests_are_counted_by_method_and_status(server: RpcServer) -> None:
    with RemoteBroker(f"127.0.0.1:{server.port}", ConnectionOptions()) as remote:
        remote.create_topic("counted", 1)
        remote.list_topics()
        remote.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            remote.describe_topic("missing")
    assert requests_of(server, "ListTopics", "OK") == 2
    assert requests_of(server, "CreateTopic", "OK") == 1
    assert requests_of(server, "DescribeTopic", "NOT_FOUND") == 1
    assert requests_of(server, "DescribeTopic", "OK") == 0
    count = server.metrics.registry.get_sample_value(
        "twinlog_rpc_duration_seconds_count",
        {"service": "twinlog.v1.Administration", "method": "ListTopics", "code": "OK"},
    )
    assert count == 2


def test_the_endpoint_serves_the_registry_then_closes_with_the_server() -> None:
    server = RpcServer(FakeBroker(), ServerConfig(port=0, metrics_port=0))
    server.start()
    endpoint = server.metrics_endpoint
    assert endpoint is not None and endpoint.port > 0
    with urllib.request.urlopen(endpoint.url, timeout=5) as answer:
        text = answer.read().decode()
    names = {family.name for family in text_string_to_metric_families(text)}
    # A broker without stats() (this fake) still answers, with what does not need it.
    assert "twinlog_under_replicated_partitions" in names
    assert "twinlog_open_transactions" not in names
    server.stop(grace_ms=0)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(endpoint.url, timeout=2)


def test_no_metrics_port_no_endpoint() -> None:
    server = RpcServer(FakeBroker(), ServerConfig(port=0))
    assert server.metrics_endpoint is None
    with pytest.raises(Exception, match="metrics_port"):
        ServerConfig(metrics_port=-2)


def test_the_engine_collector_reads_a_real_broker_at_scrape_time(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        metrics = ServerMetrics(broker.stats)
        before = {f.name for f in text_string_to_metric_families(metrics.exposition().decode())}
        assert {"twinlog_open_transactions", "twinlog_log_size_bytes"} <= before
        broker.create_topic("late", 2)  # created after the registry: seen at the next scrape
        registry = metrics.registry
        assert (
            registry.get_sample_value("twinlog_log_end_offset", {"topic": "late", "partition": "1"})
            == 0
        )
    # A closed broker: the scrape still answers, without the broker's figures.
    after = {f.name for f in text_string_to_metric_families(metrics.exposition().decode())}
    assert "twinlog_under_replicated_partitions" in after
    assert not {"twinlog_open_transactions", "twinlog_log_size_bytes"} & after
    assert next(iter(EngineCollector(None).collect())).samples[0].value == 0


def test_figures_that_fail_for_another_reason_than_closing_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> BrokerStats:
        raise CorruptJournalError("page 7 is damaged")

    with caplog.at_level(logging.WARNING, logger="twinlog"):
        families = list(EngineCollector(broken).collect())
    assert [family.name for family in families] == ["twinlog_under_replicated_partitions"]
    assert "no broker figures" in caplog.text and "page 7 is damaged" in caplog.text


def test_method_names_split_into_service_and_method() -> None:
    assert split_method("/twinlog.v1.Producing/Produce") == ("twinlog.v1.Producing", "Produce")
    assert split_method("/grpc.health.v1.Health/Check") == ("grpc.health.v1.Health", "Check")


def test_health_turns_not_serving_as_soon_as_shutdown_begins() -> None:
    server = RpcServer(FakeBroker(), ServerConfig(port=0))
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        server.start()
        assert stub.Check(health_pb2.HealthCheckRequest(), timeout=5).status == SERVING
        watch = stub.Watch(health_pb2.HealthCheckRequest(service="twinlog.v1.Consuming"))
        assert next(watch).status == SERVING
        stopper = threading.Thread(target=server.stop, kwargs={"grace_ms": 2_000})
        stopper.start()
        try:
            assert next(watch).status == NOT_SERVING  # during the grace period
        finally:
            watch.cancel()
            stopper.join(timeout=10)
        with pytest.raises(grpc.RpcError) as stopped:
            stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
        assert stopped.value.code() is grpc.StatusCode.UNAVAILABLE


def test_health_needs_no_token_where_everything_else_does(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("a-token-of-sixteen-characters alice\n")
    server = RpcServer(FakeBroker(), ServerConfig(port=0, tokens_file=str(tokens)))
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            assert check(health_pb2.HealthCheckRequest(), timeout=5).status == SERVING
        with RemoteBroker(f"127.0.0.1:{server.port}", ConnectionOptions()) as remote:
            with pytest.raises(Exception, match="bearer token"):
                remote.list_topics()
    finally:
        server.stop(grace_ms=0)


def test_slow_requests_are_logged_at_info_the_rest_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = RpcServer(FakeBroker(), ServerConfig(port=0, request_log_slow_ms=0))
    server.start()
    try:
        with caplog.at_level(logging.INFO, logger=REQUEST_LOGGER):
            with RemoteBroker(f"127.0.0.1:{server.port}", ConnectionOptions()) as remote:
                remote.list_topics()
    finally:
        server.stop(grace_ms=0)
    lines = [r for r in caplog.records if r.name == REQUEST_LOGGER]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    fields = getattr(lines[0], FIELDS_ATTRIBUTE)
    assert fields["method"] == "/twinlog.v1.Administration/ListTopics"
    assert (fields["status"], fields["principal"], fields["slow"]) == ("OK", "anonymous", "true")


def test_fast_requests_stay_below_info(server: RpcServer, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=REQUEST_LOGGER):
        with RemoteBroker(f"127.0.0.1:{server.port}", ConnectionOptions()) as remote:
            remote.list_topics()
    assert not [r for r in caplog.records if r.name == REQUEST_LOGGER]


def test_key_value_pairs_split_back_into_their_values() -> None:
    fields = {"principal": "ops", "reason": 'a "quoted" = reason', "empty": "", "none": None}
    text = format_pairs(fields)
    parsed = dict(pair.partition("=")[::2] for pair in shlex.split(text))
    assert parsed == {"principal": "ops", "reason": 'a "quoted" = reason', "empty": "", "none": "-"}


def test_json_lines_carry_the_fields_as_keys() -> None:
    logger = logging.getLogger("twinlog.test.json")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        log_event(logger, logging.INFO, "topic.create", principal="ops", partitions=3, level="x")
    finally:
        logger.removeHandler(handler)
    line = json.loads(stream.getvalue())
    assert line["event"] == "topic.create" and line["principal"] == "ops"
    assert line["partitions"] == 3 and line["level"] == "INFO" and line["field_level"] == "x"
    assert line["message"].startswith("topic.create principal=ops")
    assert line["time"].endswith("Z") and line["logger"] == "twinlog.test.json"


def test_an_unknown_level_or_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log level 'LOUD'"):
        configure_server_logging("LOUD")
    with pytest.raises(ValueError, match="log format"):
        configure_server_logging("info", "xml")
