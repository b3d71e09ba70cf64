"""ListTransactions (KIP-664), as ``kafka-transactions.sh list`` asks each broker: the
transactions in flight with Kafka's state names, and its filters."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse

from twinlog.rpc.client import Producer


def _listed(raw: Any, version: int = 1, **filters: Any) -> Any:
    fields = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
    fields["transactional_id_pattern"] = None
    fields.update(filters)
    return raw.call(ListTransactionsRequest(**fields), ListTransactionsResponse, version)


def test_open_transactions_are_listed_and_filtered(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic()
    with (
        Producer(kafka_server.broker, transactional_id="lt-first") as first,
        Producer(kafka_server.broker, transactional_id="lt-second") as second,
    ):
        for producer in (first, second):
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"open", partition=0)
            producer.flush()
        (first_id,) = [
            t.producer_id
            for t in kafka_server.broker.list_transactions()
            if t.transactional_id == "lt-first"
        ]

        answer = _listed(raw)
        assert answer.error_code == 0 and answer.unknown_state_filters == []
        ours = {
            t.transactional_id: t
            for t in answer.transaction_states
            if t.transactional_id.startswith("lt-")
        }
        assert set(ours) == {"lt-first", "lt-second"}
        assert {t.transaction_state for t in ours.values()} == {"Ongoing"}
        assert ours["lt-first"].producer_id == first_id

        by_producer = _listed(raw, producer_id_filters=[first_id]).transaction_states
        assert [t.transactional_id for t in by_producer] == ["lt-first"]
        # v2's pattern filter is Kafka 4.1's, past the release answered as (Kafka 3.8)
        assert _listed(raw, version=2, transactional_id_pattern="lt-sec.*").error_code == 35
        preparing = _listed(raw, state_filters=["PrepareCommit", "Bogus"])
        assert preparing.transaction_states == [] and preparing.unknown_state_filters == ["Bogus"]
        longer = _listed(raw, duration_filter=3_600_000).transaction_states  # none an hour old
        assert [t for t in longer if t.transactional_id.startswith("lt-")] == []
        every = _listed(raw, version=0).transaction_states  # v0: no duration filter
        assert {"lt-first", "lt-second"} <= {t.transactional_id for t in every}

        first.abort_transaction()
        second.commit_transaction()
    # Completed: listed while their markers are applied (PrepareAbort, PrepareCommit...),
    # then no longer.
    deadline = time.monotonic() + 10
    while True:
        left = {
            t.transactional_id: t.transaction_state
            for t in _listed(raw).transaction_states
            if t.transactional_id.startswith("lt-")
        }
        if not left:
            break
        assert set(left.values()) <= {
            "PrepareAbort",
            "PrepareCommit",
            "CompleteAbort",
            "CompleteCommit",
        }, left
        assert time.monotonic() < deadline, left
        time.sleep(0.05)
