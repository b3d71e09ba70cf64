"""What every ``twinlog`` command shares: connection flags, logging, help layout."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import queue
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

from twinlog.engine.base.errors import BrokerUnavailableError
from twinlog.rpc.cli.arguments import positive_int
from twinlog.rpc.cli.token import resolve_token
from twinlog.rpc.client.connection import DEFAULT_SERVER, TOKEN_ENVIRONMENT, ConnectionOptions
from twinlog.rpc.client.retry import RetryPolicy

# How long a command waits for the server to accept a connection before it says so:
# a wrong --server used to take the whole retry budget (10-19 s) and a stray log line.
CONNECT_TIMEOUT_MS = 3_000

LOG_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s"
LOG_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


def configure_logging(level: str = "INFO") -> None:
    """Readable lines on stderr: time, level, logger, message."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=LOG_FORMAT,
        datefmt=LOG_DATE_FORMAT,
        stream=sys.stderr,
        force=True,
    )


@contextlib.contextmanager
def zookeeper_client_quiet() -> Iterator[None]:
    """kazoo's connection chatter kept off a command's stderr while it is a ZooKeeper
    client: an unreachable ZooKeeper printed a "Connection dropped" line per retry before
    the one error line that says the same, with the address and what to check."""
    kazoo_logger = logging.getLogger("kazoo")
    level = kazoo_logger.level
    kazoo_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        kazoo_logger.setLevel(level)


def add_command(
    subparsers: Any, name: str, summary: str, example: str, parents: list[argparse.ArgumentParser]
) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with an example."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=summary,
        description=summary,
        epilog="example:\n" + textwrap.indent(textwrap.dedent(example).strip(), "  "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=parents,
    )
    # main() reports an unknown option with the usage of the innermost subcommand (the
    # top-level parser would show its own usage, which names no option of the command).
    parser.set_defaults(command_parser=parser)
    return parser


def connection_parser(server_default: str | None = DEFAULT_SERVER) -> argparse.ArgumentParser:
    """Flags of every command that talks to a server (``server_default`` None: --server
    is one of several sources, and a command run without it checks no server first)."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--server",
        "--bootstrap-server",  # Kafka's console tools' name for it
        dest="server",
        default=server_default,
        help="host:port of the server, or a cluster's bootstrap list host:port,host:port"
        + (f" (default {server_default})" if server_default else ""),
    )
    token = group.add_mutually_exclusive_group()
    token.add_argument(
        "--token",
        help=f"bearer token (default: ${TOKEN_ENVIRONMENT}); visible to other users in `ps`: "
        "prefer --token-file or the environment",
    )
    token.add_argument(
        "--token-file", help="file holding the bearer token (one trailing newline is ignored)"
    )
    group.add_argument("--tls", action="store_true", help="use TLS with the system's CAs")
    group.add_argument("--tls-ca", help="PEM file of the CA that signed the server's certificate")
    group.add_argument("--tls-cert", help="PEM client certificate (mutual TLS)")
    group.add_argument("--tls-key", help="PEM key of the client certificate")
    group.add_argument("--tls-server-name", help="name to expect in the server's certificate")
    group.add_argument(
        "--timeout-request-ms",
        type=positive_int,
        default=10_000,
        help="deadline of one request, and how long retriable errors are retried (10000)",
    )
    return parser


def output_parser() -> argparse.ArgumentParser:
    """``--format text|json``: tables for reading, or JSON for scripts."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output (default text)"
    )
    return parser


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2))


def add_topic_argument(
    parser: argparse.ArgumentParser, dest: str = "topic", *, required: bool = True, help: str = ""
) -> None:
    """The topic as a positional argument, or as ``--topic NAME`` as Kafka's console tools
    take it; ``resolve_topic`` checks after parsing that it was given once."""
    parser.add_argument(dest, nargs="?", metavar="TOPIC", help=help or "the topic")
    parser.add_argument(
        "--topic",
        dest=f"{dest}_option",
        metavar="TOPIC",
        help="the topic, as Kafka's tools take it",
    )
    parser.set_defaults(topic_argument=(dest, required))


def resolve_topic(args: argparse.Namespace) -> str | None:
    """Put ``--topic``'s value where the positional one goes; a problem to report if the
    two disagree, or if a command that needs a topic got neither (None: fine)."""
    dest, required = getattr(args, "topic_argument", (None, False))
    if dest is None:
        return None
    positional, option = getattr(args, dest), getattr(args, f"{dest}_option")
    if positional is not None and option is not None and positional != option:
        return f"the topic is given twice ({positional!r} and --topic {option!r}); give it once"
    setattr(args, dest, positional if positional is not None else option)
    if required and getattr(args, dest) is None:
        return "name the topic: as an argument, or with --topic NAME"
    return None


def connection_options(args: argparse.Namespace) -> ConnectionOptions:
    token = resolve_token(args.token_file, args.token)
    return ConnectionOptions(
        token=token,
        tls=args.tls,
        tls_ca_file=args.tls_ca,
        tls_cert_file=args.tls_cert,
        tls_key_file=args.tls_key,
        tls_server_name=args.tls_server_name,
        request_timeout_ms=args.timeout_request_ms,
    )


def check_server(args: argparse.Namespace) -> None:
    """Fail within seconds, saying so, when no server accepts a connection at --server
    (for a bootstrap list: at none of its addresses; they are dialled together)."""
    import grpc

    from twinlog.rpc.client.bootstrap import is_bootstrap_list, parse_bootstrap
    from twinlog.rpc.client.remote import open_channel

    addresses = parse_bootstrap(args.server) if is_bootstrap_list(args.server) else [args.server]
    timeout_s = min(args.timeout_request_ms, CONNECT_TIMEOUT_MS) / 1000
    options = connection_options(args)
    states: queue.SimpleQueue[tuple[str, grpc.ChannelConnectivity]] = queue.SimpleQueue()
    channels = {address: open_channel(address, options) for address in addresses}
    callbacks = {
        address: (lambda state, address=address: states.put((address, state)))
        for address in addresses
    }
    failed: set[str] = set()
    ready = False
    deadline_s = time.monotonic() + timeout_s
    try:
        for address, channel in channels.items():
            channel.subscribe(callbacks[address], try_to_connect=True)
        # A refused connection or a failed TLS handshake shows at once as TRANSIENT_FAILURE;
        # an address that swallows packets shows nothing until the deadline.
        while not ready and len(failed) < len(addresses):
            try:
                address, state = states.get(timeout=max(0.0, deadline_s - time.monotonic()))
            except queue.Empty:
                break
            ready = state is grpc.ChannelConnectivity.READY
            if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                failed.add(address)
    finally:
        for address, channel in channels.items():
            channel.unsubscribe(callbacks[address])
            channel.close()
    if not ready:
        why = (
            "the connection failed (refused, unknown host, or a TLS mismatch)"
            if len(failed) == len(addresses)
            else f"no answer within {timeout_s:g} s"
        )
        raise BrokerUnavailableError(
            f"cannot reach {args.server}: {why}; is the server running at that address "
            "(twinlog serve), with matching TLS settings (--tls, --tls-ca)?"
        )


def retry_policy(args: argparse.Namespace) -> RetryPolicy:
    """A command gives up on retriable errors (server down, ...) after --timeout-request-ms."""
    return RetryPolicy(timeout_ms=args.timeout_request_ms)


def print_table(rows: list[list[str]], header: list[str], indent: str = "") -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            indent
            + "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
