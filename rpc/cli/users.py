"""``twinlog users``: the SCRAM credentials Kafka clients log in with (SASL/SCRAM-SHA-256
and SCRAM-SHA-512 on the Kafka listener), as Kafka's ``kafka-configs.sh --alter
--add-config 'SCRAM-SHA-256=[...]' --entity-type users``.

The password is read from ``--password-file`` (one trailing newline dropped), from
standard input when it is not a terminal, or asked for at a prompt: never from the command
line. It is salted and hashed here; the server keeps only the salt, the iteration count,
StoredKey and ServerKey. ``list`` shows users, mechanisms and iteration counts, nothing
secret. Set and delete need ALTER on the cluster (``cluster:*`` in the ACL file), list
DESCRIBE. A single node keeps them in its data directory; a cluster in ZooKeeper
(``config/users/<user>``, as Kafka), so any one broker sets and lists them for all.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.cli.arguments import UsageError, positive_int
from twinlog.rpc.cli.common import (
    add_command,
    connection_options,
    connection_parser,
    output_parser,
    print_json,
    print_table,
    retry_policy,
)
from twinlog.rpc.client import Admin
from twinlog.rpc.policy.scram import ITERATIONS_DEFAULT, MECHANISMS


def register(subparsers: Any) -> None:
    connection = connection_parser()
    users = add_command(
        subparsers,
        "users",
        "SCRAM credentials for Kafka clients' SASL/SCRAM logins: set, list, delete",
        "twinlog users set-scram --user alice --mechanism SCRAM-SHA-512 --password-file pw.txt\n"
        "twinlog users list",
        [],
    )
    commands = users.add_subparsers(dest="users_command", required=True, metavar="COMMAND")
    set_scram = add_command(
        commands,
        "set-scram",
        "set (or replace) a user's SCRAM credential for one mechanism",
        "twinlog users set-scram --user alice --mechanism SCRAM-SHA-256 --password-file pw.txt\n"
        'printf %s "$PASSWORD" | twinlog users set-scram --user alice '
        "--mechanism SCRAM-SHA-512 --iterations 8192",
        [connection],
    )
    set_scram.add_argument("--user", required=True, help="the user (the principal ACLs name)")
    set_scram.add_argument("--mechanism", required=True, choices=MECHANISMS)
    set_scram.add_argument(
        "--iterations",
        type=positive_int,
        default=ITERATIONS_DEFAULT,
        help=f"PBKDF2 iterations, 4096..16384 (default {ITERATIONS_DEFAULT})",
    )
    set_scram.add_argument(
        "--password-file",
        metavar="FILE",
        help="file holding the password (one trailing newline is ignored); without it: "
        "standard input, or a prompt on a terminal",
    )
    set_scram.set_defaults(run=run_set)
    listing = add_command(
        commands,
        "list",
        "list SCRAM users with their mechanisms and iteration counts (nothing secret)",
        "twinlog users list\ntwinlog users list --format json",
        [connection, output_parser()],
    )
    listing.set_defaults(run=run_list)
    delete = add_command(
        commands,
        "delete-scram",
        "delete a user's SCRAM credential for one mechanism",
        "twinlog users delete-scram --user alice --mechanism SCRAM-SHA-256",
        [connection],
    )
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", required=True, choices=MECHANISMS)
    delete.set_defaults(run=run_delete)


def _open_admin(args: argparse.Namespace) -> Admin:
    return Admin(args.server, connection=connection_options(args), retry=retry_policy(args))


def _without_one_newline(text: str) -> str:
    for newline in ("\r\n", "\n"):
        if text.endswith(newline):
            return text[: -len(newline)]
    return text


def read_password(args: argparse.Namespace) -> str:
    if args.password_file:
        try:
            text = Path(args.password_file).read_text(encoding="utf-8")
        except OSError as error:
            raise InvalidConfigError(
                f"cannot read --password-file {args.password_file}: {error.strerror}"
            ) from None
        source = f"--password-file {args.password_file}"
    elif sys.stdin.isatty():
        text = getpass.getpass(f"SCRAM password for {args.user}: ")
        if getpass.getpass("again: ") != text:
            raise UsageError("the two passwords differ; nothing was changed")
        source = "the prompt"
    else:
        text = sys.stdin.read()
        source = "standard input"
    password = _without_one_newline(text)
    if not password:
        raise UsageError(f"the password from {source} is empty; give one")
    return password


def run_set(args: argparse.Namespace) -> int:
    password = read_password(args)
    with _open_admin(args) as admin:
        try:
            admin.set_scram_credential(args.user, args.mechanism, password, args.iterations)
        except ValueError as error:
            raise UsageError(str(error)) from None
    print(f"set {args.mechanism} credential of {args.user} ({args.iterations} iterations)")
    return 0


def run_list(args: argparse.Namespace) -> int:
    with _open_admin(args) as admin:
        users = admin.scram_users()
    if args.format == "json":
        print_json(
            [
                {
                    "user": user,
                    "mechanisms": [{"mechanism": m, "iterations": i} for m, i in held],
                }
                for user, held in users.items()
            ]
        )
        return 0
    rows = [
        [user, ", ".join(f"{m} ({i} iterations)" for m, i in held)] for user, held in users.items()
    ]
    if not rows:
        print("no SCRAM users; add one with 'twinlog users set-scram'")
        return 0
    print_table(rows, ["USER", "MECHANISMS"])
    return 0


def run_delete(args: argparse.Namespace) -> int:
    with _open_admin(args) as admin:
        admin.delete_scram_credential(args.user, args.mechanism)
    print(f"deleted {args.mechanism} credential of {args.user}")
    return 0
