"""What every ``twinlog`` command shares: connection flags, logging, help layout."""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from typing import Any

from rpc.client.connection import DEFAULT_SERVER, TOKEN_ENVIRONMENT, ConnectionOptions
from rpc.client.retry import RetryPolicy

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
    return parser


def connection_parser() -> argparse.ArgumentParser:
    """Flags of every command that talks to a server."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help=f"host:port of the server (default {DEFAULT_SERVER})",
    )
    group.add_argument(
        "--token", help=f"bearer token (default: ${TOKEN_ENVIRONMENT}); never logged"
    )
    group.add_argument("--tls", action="store_true", help="use TLS with the system's CAs")
    group.add_argument("--tls-ca", help="PEM file of the CA that signed the server's certificate")
    group.add_argument("--tls-cert", help="PEM client certificate (mutual TLS)")
    group.add_argument("--tls-key", help="PEM key of the client certificate")
    group.add_argument("--tls-server-name", help="name to expect in the server's certificate")
    group.add_argument(
        "--timeout-request-ms",
        type=int,
        default=10_000,
        help="deadline of one request, and how long retriable errors are retried (10000)",
    )
    return parser


def connection_options(args: argparse.Namespace) -> ConnectionOptions:
    return ConnectionOptions(
        token=args.token,
        tls=args.tls,
        tls_ca_file=args.tls_ca,
        tls_cert_file=args.tls_cert,
        tls_key_file=args.tls_key,
        tls_server_name=args.tls_server_name,
        request_timeout_ms=args.timeout_request_ms,
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
