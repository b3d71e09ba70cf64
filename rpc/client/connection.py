"""Where a client's requests go: a server address, a cluster, or an embedded broker.

``connect("127.0.0.1:7070", token=...)`` opens a gRPC channel (``RemoteBroker``), exactly
as before clusters; ``connect("h1:p1,h2:p2,h3:p3")``, a bootstrap list (any target with a
comma, so ``"h1:p1,"`` for a cluster reached through one address), follows the cluster's
leaders (``ClusterBroker``, docs/clients.md); ``connect(broker)`` with an ``twinlog.Broker`` (or anything with its methods)
returns it as is: the same client code then runs in-process, without network.
"""

from __future__ import annotations

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.client.bootstrap import is_bootstrap_list
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import (
    DEFAULT_SERVER,
    TOKEN_ENVIRONMENT,
    ConnectionOptions,
)
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.wire.broker_api import BrokerApi

__all__ = ["DEFAULT_SERVER", "TOKEN_ENVIRONMENT", "ConnectionOptions", "Target", "connect"]

Target = str | BrokerApi


def connect(target: Target, options: ConnectionOptions | None = None) -> tuple[BrokerApi, bool]:
    """(broker, owned): ``owned`` is True when the caller opened it and must close it."""
    if isinstance(target, str):
        if is_bootstrap_list(target):
            return ClusterBroker(target, options or ConnectionOptions()), True
        return RemoteBroker(target, options or ConnectionOptions()), True
    if isinstance(target, BrokerApi):
        return target, False
    raise InvalidConfigError(
        f"target {target!r} is neither a server address ('host:port'), a cluster's bootstrap "
        "list ('h1:p1,h2:p2') nor a broker; pass '127.0.0.1:7070' or an twinlog.Broker"
    )
