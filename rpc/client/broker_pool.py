"""One connection per broker address, opened on first use: ``BrokerPool``.

The cluster client (``cluster``) reaches each broker through its own ``RemoteBroker``
(one gRPC channel). Addresses, not broker ids, key the pool: a broker restarted on
another port is another address, and the old channel is simply left idle (gRPC backs
off its reconnects) until ``close``.

Thread rule: any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from twinlog.engine.base.cluster_metadata import ClusterMetadata
from twinlog.engine.base.errors import LogClosedError
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.produce_stream import ProducePipe
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.policy.acl_bindings import AclEntry
from twinlog.rpc.wire.broker_api import BrokerApi, CoordinatorLookup


class NodeBroker(BrokerApi, CoordinatorLookup, Protocol):
    """The broker API at one address, plus what a cluster client needs of it: the
    cluster's metadata, a produce pipe, and FindCoordinator."""

    def cluster_metadata(
        self, topics: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> ClusterMetadata: ...

    def open_produce_stream(self) -> ProducePipe: ...

    def shutdown_broker(self, broker_id: int) -> None: ...

    def list_acls(
        self, principal: str | None = None, resource_type: str | None = None
    ) -> list[AclEntry]: ...

    def create_acls(self, entries: list[AclEntry]) -> list[AclEntry]: ...

    def delete_acls(self, entries: list[AclEntry]) -> list[AclEntry]: ...


NodeOpener = Callable[[str, ConnectionOptions], NodeBroker]


class BrokerPool:
    def __init__(self, options: ConnectionOptions, opener: NodeOpener = RemoteBroker) -> None:
        self.options = options
        self._opener = opener
        self._lock = threading.Lock()
        self._brokers: dict[str, NodeBroker] = {}
        self._closed = False

    def get(self, address: str) -> NodeBroker:
        with self._lock:
            if self._closed:
                # Not retriable: a call still under way when its client closed (a fetch
                # the consumer left running) ends here instead of routing again.
                raise LogClosedError(f"the client is closed; {address} is not called")
            broker = self._brokers.get(address)
            if broker is None:
                # Opening a channel connects lazily: nothing here waits on the network.
                broker = self._brokers[address] = self._opener(address, self.options)
            return broker

    def close(self) -> None:
        with self._lock:
            brokers, self._brokers = list(self._brokers.values()), {}
            self._closed = True
        for broker in brokers:
            broker.close()

    def __enter__(self) -> BrokerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
