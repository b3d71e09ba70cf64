"""DescribeTransactions (KIP-664), as ``kafka-transactions.sh describe`` asks a
transactional id's coordinator: an open transaction with its partitions, then its
completion; an unknown or empty id, and one the caller may not describe, are answered per
id; kafka-python's ``describe_transactions`` reads the answer."""

from __future__ import annotations

import logging
import time
from typing import Any

import kafka.errors
import pytest
from kafka import KafkaAdminClient
from kafka.admin import TransactionState
from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse
from kafka.structs import TopicPartition

from twinlog.rpc.client import Producer
from twinlog.rpc.kafka.error_codes import (
    INVALID_REQUEST,
    NONE,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_NOT_FOUND,
)
from twinlog.rpc.policy.audit import AUDIT_LOGGER

TIMEOUT_MS = 30_000


def _described(raw: Any, *transactional_ids: str) -> list[Any]:
    request = DescribeTransactionsRequest(transactional_ids=list(transactional_ids))
    states: list[Any] = raw.call(request, DescribeTransactionsResponse, 0).transaction_states
    return states


def _admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def test_an_open_transaction_is_described_then_its_completion(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    with Producer(
        kafka_server.broker, transactional_id="dt-open", transaction_timeout_ms=TIMEOUT_MS
    ) as producer:
        producer.init_transactions()
        before_ms = time.time_ns() // 1_000_000
        producer.begin_transaction()
        for partition in (0, 1):
            producer.send(topic, b"open", partition=partition)
        producer.flush()
        (listed,) = [
            t for t in kafka_server.broker.list_transactions() if t.transactional_id == "dt-open"
        ]

        client = _admin(kafka_server.bootstrap)
        try:
            described = client.describe_transactions(["dt-open"])["dt-open"]
            with pytest.raises(kafka.errors.TransactionalIdNotFoundError):
                client.describe_transactions(["dt-never-used"])
        finally:
            client.close()
        assert described.state is TransactionState.ONGOING
        assert described.coordinator_id == 0
        assert (described.producer_id, described.producer_epoch) == (
            listed.producer_id,
            listed.producer_generation,
        )
        assert described.transaction_timeout_ms == TIMEOUT_MS
        assert before_ms - 1_000 <= described.transaction_start_time_ms <= time.time() * 1000
        assert described.topic_partitions == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        producer.commit_transaction()
    # Described while its commit is applied, then not found: no row is kept between
    # transactions (Kafka would describe it as CompleteCommit, then Empty).
    deadline = time.monotonic() + 10
    while True:
        (state,) = _described(raw, "dt-open")
        if state.error_code == TRANSACTIONAL_ID_NOT_FOUND:
            break
        assert state.error_code == NONE
        assert state.transaction_state in ("PrepareCommit", "CompleteCommit"), state
        assert time.monotonic() < deadline, state
        time.sleep(0.05)


def test_unknown_and_empty_ids_are_answered_per_id_in_order(raw: Any) -> None:
    states = _described(raw, "dt-unknown", "", "dt-unknown")
    assert [(s.transactional_id, s.error_code) for s in states] == [
        ("dt-unknown", TRANSACTIONAL_ID_NOT_FOUND),
        ("", INVALID_REQUEST),
        ("dt-unknown", TRANSACTIONAL_ID_NOT_FOUND),
    ]
    # Kafka's defaults in a refused entry
    assert (states[0].transaction_state, states[0].producer_id, states[0].topics) == ("", 0, [])
    assert _described(raw) == []  # nothing asked, nothing answered


def test_acls_refuse_ids_the_caller_may_not_describe(
    guarded_server: Any, guarded_raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    topic = guarded_server.topic()
    names = ("seen-dt", "writer-dt", "hidden-dt")
    producers = [Producer(guarded_server.broker, transactional_id=name) for name in names]
    try:
        for producer in producers:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"open", partition=0)
            producer.flush()
        with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
            states = _described(guarded_raw, *names, "seen-unknown", "hidden-unknown")
        assert [(s.transactional_id, s.error_code) for s in states] == [
            ("seen-dt", NONE),  # a DESCRIBE grant
            ("writer-dt", NONE),  # a WRITE grant implies DESCRIBE
            ("hidden-dt", TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            ("seen-unknown", TRANSACTIONAL_ID_NOT_FOUND),
            # checked first: whether it exists is not told
            ("hidden-unknown", TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ]
        assert states[0].transaction_state == "Ongoing"
        assert states[2].producer_id == 0 and states[2].topics == []
        denials = [r.getMessage() for r in caplog.records if "acl.denied" in r.getMessage()]
        assert len(denials) == 2 and "hidden-dt" in denials[0]
        for producer in producers:
            producer.abort_transaction()
    finally:
        for producer in producers:
            producer.close()
