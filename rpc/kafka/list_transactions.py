"""ListTransactions (KIP-664): the transactions in flight at this broker's coordinators, as
``kafka-transactions.sh list`` and admin clients ask each broker, with Kafka's state names
and its filters (state, producer id, running for longer than a duration, transactional id
pattern).

twinlog keeps no row for a transactional id between its transactions, so an id whose
producer has none open is not listed (Kafka lists it as ``Empty``). Listed are the ids the
caller may describe (DESCRIBE on the transactional id, as Kafka asks; WRITE and ABORT imply
it).
"""

from __future__ import annotations

import re
import time
from typing import Any

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse

from twinlog.engine.base.types import TransactionState
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, NONE
from twinlog.rpc.policy.auth import Resource

# Kafka's names of the coordinator's states (TransactionState.java)
KAFKA_STATE_NAMES = {
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMMITTED: "CompleteCommit",
    TransactionState.ABORTED: "CompleteAbort",
}
KNOWN_STATES = frozenset({*KAFKA_STATE_NAMES.values(), "Empty", "Dead", "PrepareEpochFence"})
NO_DURATION = -1

Listed = ListTransactionsResponse.TransactionState


def handle_list_transactions(
    request: ListTransactionsRequest, version: int, context: KafkaContext
) -> ListTransactionsResponse:
    states = set(request.state_filters or [])
    unknown = sorted(states - KNOWN_STATES)
    producer_ids = set(request.producer_id_filters or [])
    longer_than_ms = getattr(request, "duration_filter", NO_DURATION)
    if longer_than_ms is None:
        longer_than_ms = NO_DURATION
    pattern_text = getattr(request, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return ListTransactionsResponse(
            version=version,
            throttle_time_ms=0,
            error_code=INVALID_REQUEST,
            unknown_state_filters=unknown,
            transaction_states=[],
        )
    now_ms = time.time_ns() // 1_000_000
    guard, principal = context.guard, context.connection.principal
    listed: list[Any] = []
    for item in context.broker.list_transactions():
        state = KAFKA_STATE_NAMES[item.state]
        if (
            (states and state not in states)
            or (producer_ids and item.producer_id not in producer_ids)
            or (longer_than_ms >= 0 and item.age_ms(now_ms) < longer_than_ms)
            or (pattern is not None and not pattern.fullmatch(item.transactional_id))
            or not guard.may_describe(principal, item.transactional_id, Resource.TRANSACTIONAL_ID)
        ):
            continue
        listed.append(
            Listed(
                transactional_id=item.transactional_id,
                producer_id=item.producer_id,
                transaction_state=state,
            )
        )
    return ListTransactionsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=NONE,
        unknown_state_filters=unknown,
        transaction_states=listed,
    )
