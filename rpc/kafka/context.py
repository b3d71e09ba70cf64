"""What every request handler gets: the broker, where clients reach this listener, the
limits, the open transactions of Kafka producers, the shutdown flag, the guard (tokens and
ACLs) and the calling connection's state. One per connection: a copy of the listener's,
sharing everything but ``connection``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from twinlog.rpc.kafka.access import ConnectionState
from twinlog.rpc.kafka.classic_members import ClassicMembers
from twinlog.rpc.kafka.open_transactions import OpenTransactions
from twinlog.rpc.kafka.settings import KafkaListenerSettings
from twinlog.rpc.server.auth import Guard
from twinlog.rpc.server.txn_access import TransactionalAccess
from twinlog.rpc.wire.broker_api import BrokerApi

# This listener is the only broker a Kafka client sees (a single node): it leads every
# partition and coordinates every group and transactional id.
NODE_ID = 0
LEADER_EPOCH = 0


@dataclass
class KafkaContext:
    broker: BrokerApi
    endpoint: Callable[[], tuple[str, int]]  # (host, port) clients reach, known once bound
    settings: KafkaListenerSettings
    stopping: threading.Event
    transactions: OpenTransactions
    # api key -> (min, max) versions advertised in ApiVersions
    advertised_versions: Mapping[int, tuple[int, int]]
    guard: Guard
    access: TransactionalAccess  # who may use a producer id
    connection: ConnectionState
    classic_members: ClassicMembers = field(default_factory=ClassicMembers)
