"""``Admin``: topics, transactions and producers.

    with Admin("127.0.0.1:7070") as admin:
        admin.create_topic("orders", partitions=4)
        for txn in admin.list_transactions():
            print(txn.transaction_id, txn.state.value)

Reads and idempotent calls are retried on retriable errors; create and delete are
not (a retry after a lost answer would report TopicExistsError or an unknown topic).
Every call waits at most ``default_api_timeout_ms``, then raises RequestTimedOutError.

Thread rule: any thread.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from twinlog.engine.base.types import ProducerDescription, TopicDescription, TransactionDescription
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.connection import ConnectionOptions, Target, connect
from twinlog.rpc.client.kafka_config import accepts_kafka_names
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.client.timeouts import DEFAULT_API_TIMEOUT_MS, require_positive_ms


class Admin:
    @accepts_kafka_names("Admin")  # and config=; docs/client-config.md
    def __init__(
        self,
        target: Target,
        *,
        default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
        retry: RetryPolicy | None = None,
        connection: ConnectionOptions | None = None,
        **connection_options: Any,
    ) -> None:
        options = connection or ConnectionOptions(**connection_options)
        self.default_api_timeout_ms = require_positive_ms(
            "default_api_timeout_ms", default_api_timeout_ms
        )
        self._broker, self._owns_broker = connect(target, options)
        # Without a policy of its own, a call retries for as long as its deadline allows,
        # and then says it timed out (RequestTimedOutError), as default_api_timeout_ms promises.
        self.retry = retry or RetryPolicy(timeout_ms=self.default_api_timeout_ms)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_broker:
            self._broker.close()
            self._owns_broker = False

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> TopicDescription:
        with self._deadline():
            return self._broker.create_topic(name, partitions, config)

    def delete_topic(self, name: str) -> None:
        with self._deadline():
            self._broker.delete_topic(name)

    def _deadline(self) -> AbstractContextManager[None]:
        """The deadline of a call made once (not retried)."""
        return deadline_at(time.monotonic() + self.default_api_timeout_ms / 1000)

    def list_topics(self) -> list[str]:
        return call_with_retry(
            self.retry,
            self._broker.list_topics,
            "list_topics()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def describe_topic(self, name: str) -> TopicDescription:
        """Per partition: log start/end offsets and journal entries of undecided transactions."""
        return call_with_retry(
            self.retry,
            lambda: self._broker.describe_topic(name),
            "describe_topic()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def list_transactions(self) -> list[TransactionDescription]:
        return call_with_retry(
            self.retry,
            self._broker.list_transactions,
            "list_transactions()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def abort_transaction(self, transaction_id: int) -> None:
        """Abort a hanging transaction, whatever its producer (the producer is not fenced)."""
        call_with_retry(
            self.retry,
            lambda: self._broker.admin_abort_transaction(transaction_id),
            "abort_transaction()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def describe_producers(self, topic: str, partition: int = 0) -> list[ProducerDescription]:
        return call_with_retry(
            self.retry,
            lambda: self._broker.describe_producers(topic, partition),
            "describe_producers()",
            timeout_ms=self.default_api_timeout_ms,
        )
