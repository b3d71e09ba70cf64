"""``twinlog produce TOPIC``: stdin lines as records."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.cli.common import add_command, connection_options, connection_parser, retry_policy
from twinlog.rpc.client import Producer
from twinlog.rpc.client.futures import RecordFuture

RECORDS_PER_TXN_DEFAULT = 100

EXAMPLE = """
seq 1 10 | twinlog produce orders
printf 'alice:1\\nbob:2\\n' | twinlog produce orders --key-separator :
seq 1 1000 | twinlog produce orders --transactional-id loader --records-per-txn 100
"""


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "produce",
        "send each line of stdin as a record",
        EXAMPLE,
        [connection_parser()],
    )
    parser.add_argument("topic")
    parser.add_argument("--partition", type=int, help="send every record to this partition")
    parser.add_argument(
        "--key-separator", help="split each line at the first SEP into key and value"
    )
    parser.add_argument("--transactional-id", help="send in transactions under this id")
    parser.add_argument(
        "--records-per-txn",
        type=int,
        help=f"records per transaction ({RECORDS_PER_TXN_DEFAULT}); needs --transactional-id",
    )
    parser.add_argument("--compression", choices=("zstd", "none"), default="zstd")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.set_defaults(run=run, validate=validate)


def records(args: argparse.Namespace) -> Iterator[tuple[bytes | None, bytes]]:
    separator = args.key_separator.encode() if args.key_separator else None
    for raw_line in sys.stdin.buffer:
        line = raw_line.rstrip(b"\r\n")
        if separator is not None and separator in line:
            key, _, value = line.partition(separator)
            yield key, value
        else:
            yield None, line


def abort_open_transaction(producer: Producer) -> None:
    """On the way out after a failure or Ctrl-C: abort now rather than leave the
    transaction ONGOING until the broker's timeout."""
    transaction_id = producer.transaction_id
    if transaction_id is None:
        return
    try:
        producer.abort_transaction()
    except TwinlogError as error:
        print(
            f"could not abort transaction {transaction_id} ({type(error).__name__}: {error}); "
            "the broker aborts it when it times out",
            file=sys.stderr,
        )
    else:
        print(f"aborted transaction {transaction_id}: none of its records is read", file=sys.stderr)


def validate(args: argparse.Namespace) -> str | None:
    """A usage error in the flags (checked before connecting), or None."""
    if args.records_per_txn is not None and not args.transactional_id:
        return (
            "--records-per-txn needs --transactional-id (without it records are not sent in "
            "transactions)"
        )
    if args.records_per_txn is not None and args.records_per_txn <= 0:
        return "--records-per-txn must be > 0"
    return None


def run(args: argparse.Namespace) -> int:
    if args.records_per_txn is None:
        args.records_per_txn = RECORDS_PER_TXN_DEFAULT
    producer = Producer(
        args.server,
        transactional_id=args.transactional_id,
        compression=args.compression,
        linger_ms=args.linger_ms,
        connection=connection_options(args),
        retry=retry_policy(args),
        # at least linger + one request, as the Producer requires
        delivery_timeout_ms=max(args.timeout_request_ms, 1_000) + args.linger_ms,
    )
    sent = 0
    transactions = 0
    futures: list[RecordFuture] = []
    try:
        if args.transactional_id:
            producer.init_transactions()
        in_transaction = False
        for key, value in records(args):
            if args.transactional_id and not in_transaction:
                producer.begin_transaction()
                in_transaction = True
            futures.append(producer.send(args.topic, value, key=key, partition=args.partition))
            sent += 1
            if args.transactional_id and sent % args.records_per_txn == 0:
                producer.commit_transaction()
                transactions += 1
                in_transaction = False
            if len(futures) >= 10_000:
                for future in futures:
                    future.result()
                futures.clear()
        if in_transaction:
            producer.commit_transaction()
            transactions += 1
        producer.flush()
        for future in futures:
            future.result()  # raises the first failure
    except BaseException:  # an error, or Ctrl-C (KeyboardInterrupt): main() reports it
        abort_open_transaction(producer)
        raise
    finally:
        producer.close()
    suffix = f" in {transactions} transactions" if args.transactional_id else ""
    print(f"produced {sent} records to {args.topic}{suffix}", file=sys.stderr)
    return 0
