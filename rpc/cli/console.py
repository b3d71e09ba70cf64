"""``twinlog console``: the web console (twinlog.rpc.console) for a server or a cluster.

Serves on 127.0.0.1:8080 by default; it acts with the token it is given, so the broker's
ACLs decide what its pages show and do. Ctrl-C or SIGTERM stops it: the pages being
answered finish, then the port closes.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from typing import Any

from twinlog.rpc.cli.arguments import non_negative_int
from twinlog.rpc.cli.common import add_command, connection_options, connection_parser

EXAMPLE = """
twinlog console --server 127.0.0.1:7070                 # then open http://127.0.0.1:8080/
twinlog console --server 127.0.0.1:7070 --metrics http://127.0.0.1:9464/metrics   # + sizes
twinlog console --server 127.0.0.1:7071,127.0.0.1:7072 --port 9000 --token-file ops.token
twinlog console --server broker1:7070 --tls-ca ca.pem --token-file ops.token
"""
PORT_DEFAULT = 8080


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "console",
        "a web console: brokers, topics, messages, consumer groups and transactions",
        EXAMPLE,
        [connection_parser()],
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the console listens on (default 127.0.0.1: this machine only); "
        "anyone who reaches it acts with the console's token",
    )
    parser.add_argument(
        "--port",
        type=non_negative_int,
        default=PORT_DEFAULT,
        help=f"port (default {PORT_DEFAULT}; 0 picks a free one)",
    )
    metrics = parser.add_argument_group("the brokers' metrics, for sizes in bytes (optional)")
    metrics.add_argument(
        "--metrics",
        action="append",
        default=[],
        metavar="URL",
        help="a broker's Prometheus endpoint, http://HOST:PORT/metrics (twinlog serve "
        "--metrics-port); repeat it, or give a comma-separated list, for every broker",
    )
    metrics.add_argument("--metrics-token-file", help="the endpoints' --metrics-token-file")
    metrics.add_argument("--metrics-tls-ca", help="PEM file of the CA of their certificate")
    parser.set_defaults(run=run)


def metrics_source(args: argparse.Namespace) -> Any:
    """The brokers' metrics the console reads sizes from; None without --metrics."""
    from twinlog.rpc.cli.token import read_token_file
    from twinlog.rpc.console.broker_metrics import MetricsSource

    urls = tuple(url for given in args.metrics for url in given.split(",") if url)
    if not urls:
        return None
    token = read_token_file(args.metrics_token_file) if args.metrics_token_file else None
    return MetricsSource(urls, token, args.metrics_tls_ca)


def run(args: argparse.Namespace) -> int:
    try:
        from twinlog.rpc.console.server import ConsoleServer, is_loopback
        from twinlog.rpc.console.session import ConsoleTarget
    except ImportError as error:
        print(
            f"error: the console needs its extra ({error.name} is missing): "
            "pip install 'twinlog[console]'",
            file=sys.stderr,
        )
        return 1
    # Its own lines (the pages' destructive actions) at INFO; the client's at WARNING.
    logging.getLogger("twinlog.console").setLevel(logging.INFO)
    target = ConsoleTarget(args.server, connection_options(args), metrics_source(args))
    try:
        console = ConsoleServer(target, args.host, args.port).start()
    except OSError as error:
        print(
            f"error: cannot listen on {args.host}:{args.port}: {error.strerror} (--port N "
            "takes another port; --port 0 picks a free one)",
            file=sys.stderr,
        )
        return 1
    if not is_loopback(args.host):
        print(
            f"warning: the console listens on {args.host}: anyone who reaches it acts with "
            "its token (it has no login of its own)",
            file=sys.stderr,
        )
    print(f"twinlog console on {console.url} for {args.server} (Ctrl-C stops it)", flush=True)
    interrupts = getattr(args, "interrupts", None)
    stopping: list[str] = []
    if interrupts is not None:

        def stop_on_interrupt() -> str:
            console.stop()
            return "console stopped"

        interrupts.on_interrupt = stop_on_interrupt
    signal.signal(signal.SIGTERM, lambda number, frame: stopping.append("SIGTERM"))
    while not stopping and not (interrupts is not None and interrupts.interrupted.is_set()):
        time.sleep(0.2)
    if stopping:
        console.stop()
        print("console stopped", file=sys.stderr)
    else:  # Ctrl-C: the interrupt guard stops the console and ends the process
        time.sleep(5)
    return 0
