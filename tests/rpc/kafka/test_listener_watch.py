"""What operators see of the Kafka listener: its requests in /metrics (by API and version,
with latency, bytes and the errors their answers carry, by Kafka's names) and in the
request log, its refusals and failed logins in the audit log, and the process's own
figures, scraped over HTTP. A real kafka-python client against a listener with tokens and
an ACL, in front of an embedded broker that creates no topic on first use."""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kafka
import kafka.errors
import pytest
from kafka.net.compat import KafkaNetClient
from prometheus_client.parser import text_string_to_metric_families

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.policy.auth import Acl, Guard, TokenTable
from twinlog.rpc.server.metrics import ServerMetrics
from twinlog.rpc.server.metrics_endpoint import MetricsEndpoint
from twinlog.rpc.server.request_observer import REQUEST_LOGGER

ALICE_TOKEN = "alice-watched-token"
BOB_TOKEN = "bob-watched-token"
ACL = """
alice  all   *
bob    read  *
"""
CLIENT_TIMEOUT_MS = 10_000
Sample = tuple[str, dict[str, str], float]


@dataclass
class Watched:
    broker: Broker
    listener: KafkaListener
    endpoint: MetricsEndpoint

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.listener.port}"

    def scrape(self) -> list[Sample]:
        host, port = self.endpoint.bound_address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        return [
            (sample.name, sample.labels, sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    directory = tmp_path_factory.mktemp("kafka-watched")
    (directory / "acl.txt").write_text(ACL)
    guard = Guard(
        TokenTable([(ALICE_TOKEN, "alice"), (BOB_TOKEN, "bob")]),
        Acl.load(directory / "acl.txt"),
        mutual_tls=False,
    )
    broker = Broker.open(directory / "data", auto_create_topics_enable=False)
    metrics = ServerMetrics(broker.stats)
    endpoint = MetricsEndpoint(metrics.registry, "127.0.0.1", 0)
    listener = KafkaListener(broker, "127.0.0.1", 0, guard=guard, metrics=metrics)
    endpoint.start()
    listener.start()
    try:
        yield Watched(broker, listener, endpoint)
    finally:
        listener.stop(grace_ms=2_000)
        endpoint.stop()
        broker.close()


def sasl(user: str, password: str, mechanism: str = "PLAIN") -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "request_timeout_ms": CLIENT_TIMEOUT_MS,
    }


def _refused_login(bootstrap: str, config: dict[str, Any]) -> None:
    """A kafka-python producer whose every login is refused (it retries until its bootstrap
    times out). Its constructor fails then, without closing its network client (kafka-python
    3.0): the client is kept here, and closed."""
    made: list[Any] = []

    def kept_client(**configs: Any) -> Any:
        made.append(KafkaNetClient(**configs))
        return made[-1]

    try:
        with pytest.raises(kafka.errors.KafkaTimeoutError, match="bootstrap"):
            kafka.KafkaProducer(
                bootstrap_servers=bootstrap,
                bootstrap_timeout_ms=1_500,
                kafka_client=kept_client,
                **config,
            )
    finally:
        for client in made:
            client.close()


def total(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(v for n, found, v in samples if n == name and labels.items() <= found.items())


def _produce_and_fetch(watched: Watched, topic: str) -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=watched.bootstrap,
        max_block_ms=CLIENT_TIMEOUT_MS,
        **sasl("alice", ALICE_TOKEN),
    )
    try:
        producer.send(topic, b"watched", partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=watched.bootstrap, consumer_timeout_ms=5_000, **sasl("alice", ALICE_TOKEN)
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        assert next(iter(consumer)).value == b"watched"
    finally:
        consumer.close()


def test_produce_and_fetch_are_counted_timed_and_logged_by_version(
    watched: Watched, caplog: pytest.LogCaptureFixture
) -> None:
    topic = "counted"
    Admin(watched.broker).create_topic(topic, partitions=1)
    with caplog.at_level(logging.DEBUG, logger=REQUEST_LOGGER):
        _produce_and_fetch(watched, topic)
    samples = watched.scrape()
    for api in ("Produce", "Fetch"):
        counted = [
            found
            for name, found, value in samples
            if name == "twinlog_kafka_requests_total" and found["api"] == api and value
        ]
        assert counted and all(found["version"].isdigit() for found in counted), samples
        version = counted[0]["version"]
        labels = {"api": api, "version": version}
        assert total(samples, "twinlog_kafka_request_duration_seconds_count", **labels) >= 1
        assert total(samples, "twinlog_kafka_request_duration_seconds_sum", **labels) > 0
        assert total(samples, "twinlog_kafka_bytes_total", direction="in", **labels) > 0
        assert total(samples, "twinlog_kafka_bytes_total", direction="out", **labels) > 0
    fetched = total(samples, "twinlog_kafka_bytes_total", api="Fetch", direction="out")
    assert fetched > len(b"watched")
    lines = [r.getMessage() for r in caplog.records if r.name == REQUEST_LOGGER]
    produced = [line for line in lines if line.startswith("kafka.request api=Produce ")]
    assert produced, lines
    assert all(
        f" {field}=" in produced[0]
        for field in ("version", "principal", "peer", "outcome", "duration_ms", "bytes_in")
    ), produced
    assert "principal=alice" in produced[0] and "outcome=answered" in produced[0]
    assert any(line.startswith("kafka.request api=Fetch ") for line in lines), lines
    # The process's own figures, from the metrics library's collectors.
    assert total(samples, "process_open_fds") > 3
    assert total(samples, "process_resident_memory_bytes") > 0


def test_errors_are_counted_by_name_and_refusals_audited(
    watched: Watched, caplog: pytest.LogCaptureFixture
) -> None:
    Admin(watched.broker).create_topic("guarded", partitions=1)
    with caplog.at_level(logging.DEBUG):
        missing = kafka.KafkaProducer(
            bootstrap_servers=watched.bootstrap, max_block_ms=1_500, **sasl("alice", ALICE_TOKEN)
        )
        try:  # no topic is created on first use here: Metadata says it is unknown
            with pytest.raises(kafka.errors.KafkaTimeoutError):
                missing.send("missing", b"lost").get(timeout=5)
        finally:
            missing.close(timeout=5)
        refused = kafka.KafkaProducer(
            bootstrap_servers=watched.bootstrap,
            max_block_ms=CLIENT_TIMEOUT_MS,
            **sasl("bob", BOB_TOKEN),
        )
        try:  # bob may read, not write
            with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
                refused.send("guarded", b"refused", partition=0).get(timeout=10)
        finally:
            refused.close(timeout=5)
    samples = watched.scrape()
    errors = "twinlog_kafka_errors_total"
    assert total(samples, errors, api="Metadata", error="UNKNOWN_TOPIC_OR_PARTITION") >= 1
    assert total(samples, errors, api="Produce", error="TOPIC_AUTHORIZATION_FAILED") >= 1
    names = {found["error"] for name, found, _ in samples if name == errors}
    assert all(name.isupper() for name in names), names
    requests = [r.getMessage() for r in caplog.records if r.name == REQUEST_LOGGER]
    assert any(
        line.startswith("kafka.request api=Produce ")
        and "principal=bob" in line
        and "errors=TOPIC_AUTHORIZATION_FAILED" in line
        for line in requests
    ), requests
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    denied = [line for line in audited if line.startswith("acl.denied principal=bob ")]
    assert denied, audited
    assert "action=write" in denied[0] and "name=guarded" in denied[0]
    assert "door=kafka" in denied[0] and "peer=127.0.0.1:" in denied[0]


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "alice", "not-" + ALICE_TOKEN), ("SCRAM-SHA-256", "alice", ALICE_TOKEN)],
)
def test_failed_logins_are_audited_without_the_password(
    watched: Watched, caplog: pytest.LogCaptureFixture, mechanism: str, user: str, password: str
) -> None:
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        _refused_login(watched.bootstrap, sasl(user, password, mechanism))
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    failed = [line for line in audited if line.startswith("authentication.failed ")]
    assert failed, audited
    line = failed[0]
    assert "door=kafka" in line and "peer=127.0.0.1:" in line and f"mechanism={mechanism}" in line
    if mechanism == "PLAIN":
        assert f"user={user}" in line
    assert not any(password in text for text in audited), audited
