"""``twinlog serve --console-port N``: the web console beside the broker, in its process.

The console reaches the broker as any client does, through the server's own gRPC port on
loopback, with the token of ``--console-token-file`` (required when the server takes
tokens), so the ACLs apply to it as to ``twinlog console``. It needs the server's port
beforehand (not ``--port 0``), and a server with TLS is reached by ``twinlog console
--tls-ca ...`` instead (the broker's certificate may not name 127.0.0.1). It starts once
the server serves and stops before it, with the Kafka listener when there is one.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from twinlog.rpc.cli.token import resolve_token
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.wire.broker_api import BrokerApi

if TYPE_CHECKING:
    from twinlog.rpc.console.broker_metrics import MetricsSource
    from twinlog.rpc.console.server import ConsoleServer
    from twinlog.rpc.server.metrics import ServerMetrics
    from twinlog.rpc.server.server import FrontEnd, ServedCluster

log = logging.getLogger("twinlog.console")
Opener = Callable[[BrokerApi, "ServedCluster | None", "ServerMetrics"], "FrontEnd"]
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("web console (docs/operations.md, Console)")
    group.add_argument(
        "--console-port",
        type=int,
        help="serve the web console on this port too (0 picks a free one, logged), acting "
        "with --console-token-file's token; needs a fixed --port",
    )
    group.add_argument(
        "--console-host", default="127.0.0.1", help="the console's address (default 127.0.0.1)"
    )
    group.add_argument(
        "--console-token-file",
        help="the token the console acts with (required with --tokens-file)",
    )


class _ConsoleBeside:
    """The console, and the Kafka listener if there is one, as one front end."""

    def __init__(self, console: ConsoleServer, kafka: FrontEnd | None) -> None:
        self.console = console
        self.kafka = kafka

    @property
    def kafka_address(self) -> tuple[str, int] | None:
        return None if self.kafka is None else self.kafka.kafka_address

    def start(self) -> None:
        if self.kafka is not None:
            self.kafka.start()
        log.info("console on %s for %s", self.console.url, self.console.session.target.server)

    def stop(self) -> None:
        self.console.stop()
        if self.kafka is not None:
            self.kafka.stop()


def own_metrics(config: ServerConfig) -> MetricsSource | None:
    """The server's own metrics endpoint, for the console's sizes: when its port is known
    beforehand and it serves plain HTTP."""
    if config.metrics_port <= 0 or config.metrics_tls_cert_file:
        return None
    from twinlog.rpc.cli.token import read_token_file
    from twinlog.rpc.console.broker_metrics import MetricsSource

    host = "127.0.0.1" if config.metrics_host in WILDCARD_HOSTS else config.metrics_host
    token = read_token_file(config.metrics_token_file) if config.metrics_token_file else None
    return MetricsSource((f"http://{host}:{config.metrics_port}/metrics",), token)


def with_console(
    args: argparse.Namespace, config: ServerConfig, open_kafka: Opener | None
) -> Opener | None:
    """``open_kafka``, or an opener of the console beside it; SystemExit naming a flag that
    does not fit (checked now, before the broker's recovery)."""
    if args.console_port is None:
        return open_kafka
    try:
        from twinlog.rpc.console.server import ConsoleServer
        from twinlog.rpc.console.session import ConsoleTarget
    except ImportError as error:
        raise SystemExit(
            f"twinlog serve: --console-port needs the console extra ({error.name} is "
            "missing): pip install 'twinlog[console]'"
        ) from None
    if config.port == 0:
        raise SystemExit("twinlog serve: --console-port needs a fixed --port (not 0)")
    if config.tls_cert_file:
        raise SystemExit(
            "twinlog serve: --console-port is for a server without TLS; run `twinlog console "
            "--server HOST:PORT --tls-ca CA.pem --token-file F` beside it instead"
        )
    if config.tokens_file and not args.console_token_file:
        raise SystemExit(
            "twinlog serve: --console-port on a server with --tokens-file needs "
            "--console-token-file: the console acts with that token, under the ACLs"
        )
    from twinlog.rpc.client.connection_options import ConnectionOptions

    token = resolve_token(args.console_token_file, None) if args.console_token_file else None
    host = "127.0.0.1" if config.host in WILDCARD_HOSTS else config.host
    target = ConsoleTarget(
        f"{host}:{config.port}", ConnectionOptions(token=token), own_metrics(config)
    )

    def open_beside(
        broker: BrokerApi, served: ServedCluster | None, metrics: ServerMetrics
    ) -> FrontEnd:
        console = ConsoleServer(target, args.console_host, args.console_port)
        try:  # bound (and serving: it reaches the broker as any client) before the broker
            console.start()  # registers or logs that it serves, as the Kafka listener is
        except OSError as error:
            raise SystemExit(
                f"twinlog serve: --console-port {args.console_port}: cannot listen on "
                f"{args.console_host}: {error.strerror}"
            ) from None
        kafka = None if open_kafka is None else open_kafka(broker, served, metrics)
        return _ConsoleBeside(console, kafka)

    return open_beside
