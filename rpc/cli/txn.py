"""``twinlog txn list|abort``."""

from __future__ import annotations

import argparse
import time
from typing import Any

from twinlog.engine.base.types import TransactionDescription
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


def register(subparsers: Any) -> None:
    connection = connection_parser()
    txn = add_command(
        subparsers,
        "txn",
        "list transactions in flight, or abort a hanging one",
        "twinlog txn list\ntwinlog txn abort 4352",
        [],
    )
    commands = txn.add_subparsers(dest="txn_command", required=True, metavar="COMMAND")
    listing = add_command(
        commands,
        "list",
        "list transactions in flight",
        "twinlog txn list\ntwinlog txn list --format json",
        [connection, output_parser()],
    )
    listing.set_defaults(run=run_list)
    abort = add_command(
        commands,
        "abort",
        "abort a transaction, whatever its producer (its records are never read)",
        "twinlog txn abort 4352",
        [connection],
    )
    abort.add_argument("transaction_id", type=int)
    abort.set_defaults(run=run_abort)


def transaction_rows(transactions: list[TransactionDescription]) -> list[list[str]]:
    now_ms = time.time_ns() // 1_000_000
    return [
        [
            str(item.transaction_id),
            item.transactional_id,
            f"{item.producer_id}/{item.producer_generation}",
            item.state.value,
            f"{item.age_ms(now_ms) / 1000:.1f}s/{item.timeout_ms / 1000:.0f}s",
            " ".join(str(tp) for tp in item.partitions) or "-",
        ]
        for item in transactions
    ]


def transaction_json(item: TransactionDescription) -> dict[str, Any]:
    """One transaction for ``--format json``: its fields, partitions as topic and index."""
    return {
        "transaction_id": item.transaction_id,
        "transactional_id": item.transactional_id,
        "producer_id": item.producer_id,
        "producer_generation": item.producer_generation,
        "state": item.state.value,
        "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in item.partitions],
        "groups": list(item.groups),
        "started_ms": item.started_ms,
        "timeout_ms": item.timeout_ms,
    }


TRANSACTION_HEADER = [
    "id",
    "transactional_id",
    "producer/gen",
    "state",
    "age/timeout",
    "partitions",
]


def run_list(args: argparse.Namespace) -> int:
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        transactions = admin.list_transactions()
    if args.format == "json":
        print_json([transaction_json(item) for item in transactions])
        return 0
    if not transactions:
        print("no transactions in flight")
        return 0
    print_table(transaction_rows(transactions), TRANSACTION_HEADER)
    return 0


def run_abort(args: argparse.Namespace) -> int:
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        admin.abort_transaction(args.transaction_id)
    print(f"aborted transaction {args.transaction_id}")
    return 0
