"""``twinlog``: the command line.

    twinlog serve --data-dir DIR           run a broker behind the gRPC server
    twinlog topics create|list|describe|delete
    twinlog produce TOPIC                  stdin lines as records
    twinlog consume TOPIC                  print records
    twinlog txn list|abort                 transactions in flight
    twinlog acls list|add|remove           ACL grants in force; grant and revoke at run time
    twinlog groups list|describe|delete|reset-offsets|delete-offsets
                                           consumer groups: lag, members, move or delete offsets
    twinlog cluster describe|up            a cluster's leaders and ISRs; a local one
    twinlog console --server ADDRESS       a web console: topics, messages, groups, transactions
    twinlog dump FILE                      a segment file's batches and records
    twinlog demo                           transactions end to end, in 15 seconds
    twinlog bench                          end-to-end benchmark

Every command has ``--help`` with an example. Engine errors are printed as
``error: ClassName: message`` with exit status 1; usage errors (an unknown option,
a negative count, a token with a space) exit with 2 and the subcommand's usage or one
line; Ctrl-C ends a command with status 130 (128 + SIGINT, as shells expect) within
a second and no traceback, even when the server does not answer (``interrupts.py``).
docs/cli.md describes every command's flags and formats.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from twinlog import __version__
from twinlog.engine.base import extensions
from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.cli.interrupts import EXIT_INTERRUPTED

# Nothing above imports gRPC: it reads GRPC_VERBOSITY once, when first imported, and
# main() must set it before that (the commands' modules import the client, hence gRPC).
EXIT_USAGE = 2  # as argparse's own


def _register_demo(subparsers: object) -> None:
    from twinlog.rpc.cli import demo

    demo.register(subparsers)


def _register_bench(subparsers: object) -> None:
    from twinlog.rpc.cli.common import add_command

    parser = add_command(
        subparsers,
        "bench",
        "end-to-end benchmark: server and client processes, SQLite for comparison",
        "twinlog bench --transactions 20 --json results.json",
        [],
    )
    parser.add_argument("bench_arguments", nargs=argparse.REMAINDER, help="see --help")


def _run_bench(arguments: list[str]) -> int:
    # The benchmarks are not installed with the package; an editable install (the
    # README's) runs them from its checkout, whose root is the twinlog package's folder.
    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / "bench" / "e2e" / "runner.py").is_file():
        print(
            "error: twinlog bench needs a source checkout of twinlog (the benchmarks are not "
            "installed with the package): install it with `pip install -e CHECKOUT`, or run "
            "`python -m bench` inside the checkout",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(checkout))
    from bench.e2e.runner import main as bench_main

    return bench_main(arguments, prog="twinlog bench")


# The first lines a newcomer runs, in order, on a fresh machine (a test runs them).
EXAMPLE = """\
twinlog demo
twinlog serve --data-dir ./data &
twinlog topics create orders --partitions 2
seq 1 5 | twinlog produce orders
twinlog consume orders --from-beginning --max-messages 5"""


def build_parser() -> argparse.ArgumentParser:
    from twinlog.rpc.cli import acls as cli_acls
    from twinlog.rpc.cli import cluster as cli_cluster
    from twinlog.rpc.cli import console as cli_console
    from twinlog.rpc.cli import consume as cli_consume
    from twinlog.rpc.cli import dump as cli_dump
    from twinlog.rpc.cli import groups as cli_groups
    from twinlog.rpc.cli import partitions as cli_partitions
    from twinlog.rpc.cli import produce as cli_produce
    from twinlog.rpc.cli import serve as cli_serve
    from twinlog.rpc.cli import topics as cli_topics
    from twinlog.rpc.cli import txn as cli_txn
    from twinlog.rpc.cli import users as cli_users
    from twinlog.rpc.cli import zookeeper as cli_zookeeper

    parser = argparse.ArgumentParser(
        prog="twinlog",
        description="twinlog: atomic writes to many partitions, plain committed-only logs for readers",
        epilog="example:\n" + textwrap.indent(EXAMPLE, "  "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"twinlog {__version__}, hot loops: {extensions.describe()}",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cli_serve.register(subparsers)
    cli_topics.register(subparsers)
    cli_produce.register(subparsers)
    cli_consume.register(subparsers)
    cli_txn.register(subparsers)
    cli_groups.register(subparsers)
    cli_dump.register(subparsers)
    cli_zookeeper.register(subparsers)
    cli_cluster.register(subparsers)
    cli_partitions.register(subparsers)
    cli_users.register(subparsers)
    cli_acls.register(subparsers)
    cli_console.register(subparsers)
    _register_demo(subparsers)
    _register_bench(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C before the command took over its own (while the command's modules were
        # still being imported, on a busy machine): a line and 130, never a traceback.
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["bench"]:  # the runner parses its own flags (and --help)
        return _run_bench(arguments[1:])
    if arguments[:1] in (["serve"], ["demo"]):
        # gRPC's own INFO lines (fork notices, ...) would clutter the server's log (and the
        # demo's output); a user who sets GRPC_VERBOSITY gets what they asked for.
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    parser = build_parser()
    args, unknown = parser.parse_known_args(arguments)
    if unknown:  # with the usage of the subcommand they were given to; exits with 2
        command_parser = getattr(args, "command_parser", parser)
        command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    from twinlog.rpc.cli.common import resolve_topic

    problem = resolve_topic(args)
    validate = getattr(args, "validate", None)
    if problem is None and validate is not None:
        problem = validate(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "server", None):  # every command that talks to a server
        return _run_against_server(args)
    return _run(args)


def _run(args: argparse.Namespace, connect: bool = False) -> int:
    """Run the command; every error it raises becomes one line and an exit status."""
    from twinlog.rpc.cli.arguments import UsageError
    from twinlog.rpc.cli.common import check_server

    interrupts = getattr(args, "interrupts", None)
    try:
        if connect:
            if interrupts is not None:  # until the command says what it has done
                interrupts.on_interrupt = lambda: (
                    f"interrupted while reaching the server at {args.server}: nothing was "
                    "sent or read"
                )
            check_server(args)
            if interrupts is not None:
                interrupts.on_interrupt = None
        status: int = args.run(args)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except TwinlogError as error:
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `twinlog consume ... | head`
        return 0
    except KeyboardInterrupt:  # the command cleaned up on its way out (finally blocks)
        return EXIT_INTERRUPTED
    return status


def _run_against_server(args: argparse.Namespace) -> int:
    from twinlog.rpc.cli.common import configure_logging
    from twinlog.rpc.cli.interrupts import InterruptGuard

    configure_logging("WARNING")  # client warnings in the same readable lines
    # A command sets args.interrupts.on_interrupt once it has something to clean up.
    with InterruptGuard() as args.interrupts:
        return _run(args, connect=True)


if __name__ == "__main__":
    raise SystemExit(main())
