"""How the connector dials the broker, and which of its calls it retries.

The connector speaks ``twinlog.rpc.wire.broker_api.BrokerApi`` like every other client; the
two arguments exactly-once writes rely on (see ``connectors/spark/writer.py``):

    produce(..., attempt="p3-a1-t57")        tag a transactional batch with a task attempt
    commit_transaction(..., attempts=[...])  apply only the batches of these attempts
                                             (and untagged ones); drop the others

Every process that talks to the broker (the driver's planning and commit
workers, each task) opens its own connection: nothing is shared, since Spark
runs them in different Python processes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from twinlog.connectors.spark.errors import OptionError
from twinlog.connectors.spark.options import Connection
from twinlog.engine.base.errors import UnknownTopicOrPartitionError
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.wire.broker_api import BrokerApi

Result = TypeVar("Result")

# Transient trouble (a broker restart, PendingTransactionError while a commit is applied)
# is retried for this long before a task or a commit gives up and lets Spark retry it.
RETRY = RetryPolicy(timeout_ms=60_000, backoff_ms=50, backoff_max_ms=2_000)


def connect(connection: Connection) -> BrokerApi:
    """A gRPC connection to ``servers``; the caller closes it. A list of several
    addresses is a cluster's bootstrap list: reads and writes follow each partition's
    leader (``twinlog.rpc.client.cluster``); one address is one server, as before."""
    from twinlog.rpc.client.connection import connect as connect_client

    assert connection.servers is not None
    broker, _owned = connect_client(connection.servers.strip(), connection.connection_options)
    return broker


def retried(call: Callable[[], Result], what: str) -> Result:
    """``call`` with retriable errors retried (only for calls the broker answers idempotently)."""
    return call_with_retry(RETRY, call, what)


def check_write_topic(broker: BrokerApi, connection: Connection, topic: str | None) -> None:
    """Fail on the driver, before a transaction begins, if the topic option names no topic.

    Without this the mistake surfaced only in the tasks, after the transaction had
    begun, as one stack trace per task attempt. Topics named by a topic column are
    only known row by row, so the tasks still check those.
    """
    if topic is None:
        return
    try:
        retried(lambda: broker.describe_topic(topic), f"describe {topic}")
    except UnknownTopicOrPartitionError:
        raise OptionError(
            "topic",
            f"is {topic!r}, which does not exist on {connection.server}; create it first "
            f"(twinlog topics create {topic} --partitions N), or fix the name",
        ) from None
