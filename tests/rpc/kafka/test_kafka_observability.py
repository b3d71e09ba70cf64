"""The Kafka listener's requests in the server's /metrics (by API, version and outcome,
with their durations and bytes) and in the request log, as the gRPC door's are: a real
``twinlog serve`` with both doors, driven by kafka-python."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import kafka
import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_process import ServerProcess

pytestmark = pytest.mark.slow  # a server process and a Kafka client
KAFKA_SERVING = re.compile(r"serving Kafka clients on 127\.0\.0\.1:(\d+)")
METRICS_URL = re.compile(r"metrics on (http://\S+/metrics)")
CLIENT_TIMEOUT_MS = 10_000


def _found(server: ServerProcess, pattern: re.Pattern[str]) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = pattern.search(server.log())
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise AssertionError(f"{pattern.pattern} not in the log:\n{server.log()}")


def test_kafka_requests_are_counted_timed_and_logged(tmp_path: Path) -> None:
    with ServerProcess(
        tmp_path / "data",
        "--kafka-listener", "127.0.0.1:0",
        "--metrics-port", "0",
        "--log-level", "debug",  # DEBUG writes the request log
    ) as server:  # fmt: skip
        bootstrap = f"127.0.0.1:{_found(server, KAFKA_SERVING)}"
        admin = kafka.KafkaAdminClient(
            bootstrap_servers=bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
        )
        try:
            admin.create_topics([kafka.admin.NewTopic("watched", 1, 1)])
            with pytest.raises(kafka.errors.TopicAlreadyExistsError):
                admin.create_topics([kafka.admin.NewTopic("watched", 1, 1)])
        finally:
            admin.close()
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            request_timeout_ms=CLIENT_TIMEOUT_MS,
            max_block_ms=CLIENT_TIMEOUT_MS,
        )
        try:
            producer.send("watched", b"counted").get(timeout=10)
        finally:
            producer.close(timeout=5)
        with urllib.request.urlopen(_found(server, METRICS_URL), timeout=10) as answer:
            text = answer.read().decode()
        log = server.log()
    samples = [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]

    def total(name: str, **labels: str) -> float:
        return sum(v for n, found, v in samples if n == name and labels.items() <= found.items())

    requests = "twinlog_kafka_requests_total"
    assert total(requests, api="ApiVersions", outcome="answered") >= 1
    assert total(requests, api="Metadata", outcome="answered") >= 1
    assert total(requests, api="Produce", outcome="answered") >= 1
    assert total(requests, api="CreateTopics", outcome="answered") >= 1
    # CreateTopics' refusal is inside its per-topic answer: still "answered" at the top
    assert total("twinlog_kafka_request_duration_seconds_count", api="Produce") >= 1
    assert total("twinlog_kafka_bytes_total", api="Produce", direction="in") > len(b"counted")
    assert total("twinlog_kafka_bytes_total", api="Produce", direction="out") > 0
    versions = {found["version"] for n, found, _ in samples if n == requests}
    assert versions and all(v.isdigit() or v == "unsupported" for v in versions), versions
    lines = [
        line for line in log.splitlines() if "twinlog.request:" in line and "kafka.request" in line
    ]
    produced = [line for line in lines if "api=Produce " in line]
    assert produced and "outcome=answered" in produced[0] and "bytes_in=" in produced[0], lines
