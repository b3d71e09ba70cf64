"""Kafka's setting names: each one translated or refused clearly, unknown names answered
with the nearest known ones, and a kafka-python style client working end to end."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest
from rpc_fakes import FakeBroker, fake_server

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.client import Admin, ConnectionOptions, Consumer, Producer, RetryPolicy
from twinlog.rpc.client.kafka_config import (
    ADMIN,
    CONSUMER,
    KAFKA_NAMES,
    PRODUCER,
    SAME_NAMES,
    ClientParameters,
    translate_settings,
)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "client-config.md"
INITS = {PRODUCER: Producer.__init__, CONSUMER: Consumer.__init__, ADMIN: Admin.__init__}


def settings_of(client: str, config: dict[str, Any] | None = None, **keywords: Any) -> dict:
    parameters = ClientParameters.of(client, INITS[client].__wrapped__)  # type: ignore[attr-defined]
    return translate_settings(parameters, 0, keywords, config)


@pytest.mark.parametrize(
    ("client", "given", "expected"),
    [
        (PRODUCER, {"bootstrap_servers": "h:1"}, {"target": "h:1"}),
        (PRODUCER, {"bootstrap_servers": "h:1, h:2"}, {"target": "h:1,h:2"}),
        (CONSUMER, {"bootstrap_servers": ["h:3", "h:4"]}, {"target": "h:3,h:4"}),
        (CONSUMER, {"bootstrap_servers": ["h:5"]}, {"target": "h:5"}),
        (PRODUCER, {"acks": "all"}, {}),
        (PRODUCER, {"acks": -1}, {}),
        (PRODUCER, {"batch_size": 1000}, {"batch_bytes": 1000}),
        (PRODUCER, {"buffer_memory": 1 << 20}, {"buffer_bytes_max": 1 << 20}),
        (PRODUCER, {"max_request_size": 1 << 21}, {"batch_bytes_max": 1 << 21}),
        (PRODUCER, {"compression_type": "zstd"}, {"compression": "zstd"}),
        (PRODUCER, {"compression_type": None}, {"compression": "none"}),
        (PRODUCER, {"compression_type": "none"}, {"compression": "none"}),
        (PRODUCER, {"compression_type": "gzip"}, {"compression": "gzip"}),
        (PRODUCER, {"compression_type": "snappy"}, {"compression": "snappy"}),
        (PRODUCER, {"compression_type": "LZ4"}, {"compression": "lz4"}),
        (PRODUCER, {"enable_idempotence": True}, {}),
        (PRODUCER, {"enable_idempotence": False}, {}),  # always idempotent: a warning
        (PRODUCER, {"retries": 5}, {}),
        (PRODUCER, {"transactional_id": "app"}, {"transactional_id": "app"}),
        (PRODUCER, {"linger_ms": 7, "delivery_timeout_ms": 9000}, {"linger_ms": 7, "delivery_timeout_ms": 9000}),
        (PRODUCER, {"max_block_ms": 100, "transaction_timeout_ms": 5000}, {"max_block_ms": 100, "transaction_timeout_ms": 5000}),
        (ADMIN, {"request_timeout_ms": 2000}, {"request_timeout_ms": 2000}),
        (CONSUMER, {"group_id": "g", "auto_offset_reset": "earliest"}, {"group_id": "g", "auto_offset_reset": "earliest"}),
        (CONSUMER, {"fetch_max_bytes": 10, "fetch_max_wait_ms": 20, "max_poll_records": 30}, {"fetch_max_bytes": 10, "fetch_max_wait_ms": 20, "max_poll_records": 30}),
        (CONSUMER, {"isolation_level": "read_committed"}, {}),
        (CONSUMER, {"isolation_level": "read_uncommitted"}, {}),
        (CONSUMER, {"enable_auto_commit": False}, {"enable_auto_commit": False}),
        (CONSUMER, {"enable_auto_commit": True, "auto_commit_interval_ms": 500}, {"enable_auto_commit": True, "auto_commit_interval_ms": 500}),
        (CONSUMER, {"session_timeout_ms": 10_000, "max_poll_interval_ms": 60_000, "group_instance_id": "host-1"}, {"session_timeout_ms": 10_000, "max_poll_interval_ms": 60_000, "group_instance_id": "host-1"}),
        (CONSUMER, {"heartbeat_interval_ms": 3000, "partition_assignment_strategy": "cooperative-sticky"}, {}),
        (ADMIN, {"security_protocol": "PLAINTEXT"}, {}),
        (ADMIN, {"security_protocol": "SSL"}, {"tls": True}),
        (CONSUMER, {"ssl_cafile": "ca.pem", "ssl_certfile": "c.pem", "ssl_keyfile": "k.pem"}, {"tls_ca_file": "ca.pem", "tls_cert_file": "c.pem", "tls_key_file": "k.pem"}),
        (ADMIN, {"retry_backoff_ms": 10, "retry_backoff_max_ms": 200}, {"retry": RetryPolicy(backoff_ms=10, backoff_max_ms=200)}),
        (PRODUCER, {"retry_backoff_ms": 10}, {"retry": RetryPolicy(timeout_ms=120_000, backoff_ms=10)}),
        (PRODUCER, {"retry_backoff_ms": 10, "delivery_timeout_ms": 5000}, {"delivery_timeout_ms": 5000, "retry": RetryPolicy(timeout_ms=5000, backoff_ms=10)}),
        (PRODUCER, {"client_id": "billing"}, {"client_id": "billing"}),
    ],
)  # fmt: skip
def test_each_kafka_name_becomes_twinlog_settings(
    client: str, given: dict[str, Any], expected: dict[str, Any]
) -> None:
    target = {} if "bootstrap_servers" in given else {"target": "h:9"}
    assert settings_of(client, **target, **given) == {**target, **expected}


@pytest.mark.parametrize(
    ("client", "given", "message"),
    [
        (PRODUCER, {"acks": 1}, "after the write is durable"),
        (PRODUCER, {"acks": 0}, "acks='all'"),
        (PRODUCER, {"compression_type": "brotli"}, "'zstd', 'lz4', 'snappy', 'gzip', 'none'"),
        (PRODUCER, {"retries": 0}, "lower delivery_timeout_ms"),
        (PRODUCER, {"value_serializer": str.encode}, "serialize before send"),
        (CONSUMER, {"value_deserializer": bytes.decode}, "deserialize after poll"),
        (CONSUMER, {"isolation_level": "dirty"}, "read_committed"),
        (ADMIN, {"security_protocol": "SASL_SSL"}, "token="),
        (ADMIN, {"sasl_mechanism": "PLAIN"}, "token="),
        (PRODUCER, {"sasl_plain_username": "u"}, "bearer token"),
        (ADMIN, {"security_protocol": "TLS"}, "PLAINTEXT or SSL"),
        (PRODUCER, {"batch_size": "many"}, "must be an integer"),
        (PRODUCER, {"enable_idempotence": "yes"}, "true or false"),
        (PRODUCER, {"bootstrap_servers": ""}, "bootstrap_servers is empty"),
    ],
)
def test_each_refusal_says_why_and_what_to_use(
    client: str, given: dict[str, Any], message: str
) -> None:
    target = {} if "bootstrap_servers" in given else {"target": "h:9"}
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        settings_of(client, **target, **given)


def test_an_unknown_name_names_the_nearest_known_ones_never_type_error() -> None:
    with pytest.raises(InvalidConfigError, match=r"'lingr_ms'; did you mean linger_ms\?"):
        Producer("127.0.0.1:1", lingr_ms=5)
    with pytest.raises(InvalidConfigError, match="did you mean batch_size"):
        Producer("127.0.0.1:1", batch_sise=5)
    with pytest.raises(InvalidConfigError, match="has no setting 'frobnicate'"):
        Consumer("127.0.0.1:1", frobnicate=True)
    with pytest.raises(InvalidConfigError, match="did you mean bootstrap_servers"):
        Admin(bootstrap_server="127.0.0.1:1")


def test_a_name_of_another_client_says_whose_it_is() -> None:
    with pytest.raises(
        InvalidConfigError, match="does not take group_id: it is a setting of Consumer"
    ):
        Producer("127.0.0.1:1", group_id="billing")
    with pytest.raises(InvalidConfigError, match="does not take acks: it is a setting of Producer"):
        Consumer("127.0.0.1:1", acks="all")


@pytest.mark.parametrize(
    ("arguments", "keywords", "config"),
    [
        (("h:1",), {"bootstrap_servers": "h:2"}, None),
        ((), {"batch_size": 10, "batch_bytes": 10}, None),
        ((), {"max_request_size": 10, "max_batch_bytes": 10}, None),  # an older twinlog name
        ((), {"linger_ms": 5}, {"linger.ms": 5}),
        ((), {"acks": "all"}, {"acks": "all"}),
        ((), {"compression": "zstd"}, {"compression.type": "zstd"}),
        ((), {"tls_ca_file": "a.pem"}, {"ssl.cafile": "b.pem"}),
    ],
)
def test_the_same_setting_in_two_spellings_is_refused(
    arguments: tuple[Any, ...], keywords: dict[str, Any], config: dict[str, Any] | None
) -> None:
    target = {} if arguments else {"bootstrap_servers": "h:1"}
    with pytest.raises(InvalidConfigError, match="given twice"):
        Producer(*arguments, config=config, **target, **keywords)


def test_dotted_names_and_text_values_in_config() -> None:
    settings = settings_of(
        PRODUCER,
        {"bootstrap.servers": "h:1", "linger.ms": "10", "batch.size": "2048", "acks": "all"},
    )
    assert settings == {"target": "h:1", "linger_ms": 10, "batch_bytes": 2048}


@pytest.mark.parametrize(
    ("client", "config", "expected"),
    [
        # A connection setting (no default of the client's own) and one whose default is
        # derived (None): both integers, as a properties file gives them, in text.
        (PRODUCER, {"request.timeout.ms": "5000"}, {"request_timeout_ms": 5000}),
        (PRODUCER, {"delivery.timeout.ms": "30000"}, {"delivery_timeout_ms": 30000}),
        (CONSUMER, {"request.timeout.ms": " 7000"}, {"request_timeout_ms": 7000}),
        (ADMIN, {"request.timeout.ms": "9000"}, {"request_timeout_ms": 9000}),
    ],
)
def test_text_integers_in_config_for_settings_without_an_integer_default(
    client: str, config: dict[str, str], expected: dict[str, int]
) -> None:
    settings = settings_of(client, {"bootstrap.servers": "h:1", **config})
    assert settings == {"target": "h:1", **expected}


def test_a_text_value_that_is_no_integer_is_refused_naming_the_setting() -> None:
    with pytest.raises(InvalidConfigError, match="delivery_timeout_ms must be an integer"):
        settings_of(PRODUCER, {"bootstrap.servers": "h:1", "delivery.timeout.ms": "soon"})


def test_text_timeouts_in_config_reach_a_working_client(tmp_path: Path) -> None:
    from twinlog.engine.broker.broker import Broker

    config = {"request.timeout.ms": "5000", "delivery.timeout.ms": "30000", "linger.ms": "0"}
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("text-config", 1)
        with Producer(broker, config=config) as producer:
            metadata = producer.send("text-config", b"v").result(timeout=10)
    assert metadata.offset == 0


def test_kafka_connection_settings_beside_a_connection_object_are_refused() -> None:
    with pytest.raises(InvalidConfigError, match="connection= is given"):
        Admin("h:1", connection=ConnectionOptions(), ssl_cafile="ca.pem")
    with pytest.raises(InvalidConfigError, match="retry= is given"):
        Admin("h:1", retry=RetryPolicy(), retry_backoff_ms=5)


def test_a_missing_target_is_a_config_error() -> None:
    with pytest.raises(InvalidConfigError, match=r"Producer\(\) needs target.*bootstrap_servers"):
        Producer(linger_ms=5)
    with pytest.raises(InvalidConfigError, match="config must be a mapping"):
        Producer("h:1", config=["bootstrap.servers"])


def test_enable_idempotence_false_is_accepted_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="twinlog.client"):
        settings_of(PRODUCER, target="h:1", enable_idempotence=False)
    assert "always idempotent" in caplog.text


def test_docs_list_every_kafka_name() -> None:
    text = DOCS.read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE))
    names = set(KAFKA_NAMES) | set(SAME_NAMES)
    assert not sorted(names - documented), "add these to docs/client-config.md"
    assert not sorted(documented - names), "docs/client-config.md lists names not accepted"


def test_a_kafka_python_style_client_works_end_to_end_on_an_embedded_broker(
    tmp_path: Path,
) -> None:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path / "data") as broker:
        with Admin(bootstrap_servers=broker, client_id="setup") as admin:
            admin.create_topic("kafka-style", 1)
        with Producer(
            bootstrap_servers=broker,
            client_id="orders",
            acks="all",
            linger_ms=1,
            batch_size=16384,
            buffer_memory=1 << 22,
            compression_type="zstd",
            enable_idempotence=True,
            transactional_id="kafka-style-app",
            retries=2147483647,
            retry_backoff_ms=20,
        ) as producer:
            assert producer.client_id == "orders"  # type: ignore[attr-defined]
            producer.init_transactions()
            with producer.transaction():
                producer.send("kafka-style", b"committed", key=b"k")
        with Consumer(
            config={
                "bootstrap.servers": broker,
                "group.id": "kafka-style-group",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": "false",
                "isolation.level": "read_committed",
                "max.poll.records": "10",
            }
        ) as consumer:
            assert consumer.max_poll_records == 10
            assert consumer.enable_auto_commit is False  # the text "false", read as a flag
            consumer.assign([("kafka-style", 0)])
            values: list[bytes | None] = []
            deadline = time.monotonic() + 10
            while not values and time.monotonic() < deadline:
                values.extend(record.value for record in consumer.poll(200))
        assert values == [b"committed"]


def test_a_kafka_python_style_client_reaches_a_server_by_address() -> None:
    with fake_server(FakeBroker()) as (_, address):
        with Admin(bootstrap_servers=f"{address},127.0.0.1:9", request_timeout_ms=5000) as admin:
            admin.create_topic("by-address", 1)
        with Producer(bootstrap_servers=[address], acks=-1, max_block_ms=5000) as producer:
            metadata = producer.send("by-address", b"v").result(timeout=10)
        assert (metadata.topic, metadata.offset) == ("by-address", 0)


def test_an_older_twinlog_name_in_config_is_converted_and_passed_on_as_the_current_one(
    tmp_path: Path,
) -> None:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path / "data") as broker:
        producer = Producer(config={"bootstrap.servers": broker, "max.batch.bytes": "1000000"})
        try:
            assert producer.batch_bytes_max == 1_000_000
        finally:
            producer.close()
