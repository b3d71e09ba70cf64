"""``twinlog produce TOPIC``: stdin lines as records."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from rpc.cli_common import add_command, connection_options, connection_parser, retry_policy
from rpc.client import Producer
from rpc.client.futures import RecordFuture

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
        "--records-per-txn", type=int, default=100, help="records per transaction (100)"
    )
    parser.add_argument("--compression", choices=("zstd", "none"), default="zstd")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.set_defaults(run=run)


def records(args: argparse.Namespace) -> Iterator[tuple[bytes | None, bytes]]:
    separator = args.key_separator.encode() if args.key_separator else None
    for raw_line in sys.stdin.buffer:
        line = raw_line.rstrip(b"\r\n")
        if separator is not None and separator in line:
            key, _, value = line.partition(separator)
            yield key, value
        else:
            yield None, line


def run(args: argparse.Namespace) -> int:
    if args.records_per_txn <= 0:
        print("error: --records-per-txn must be > 0", file=sys.stderr)
        return 2
    producer = Producer(
        args.server,
        transactional_id=args.transactional_id,
        compression=args.compression,
        linger_ms=args.linger_ms,
        connection=connection_options(args),
        retry=retry_policy(args),
        delivery_timeout_ms=max(args.timeout_request_ms, 1_000),
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
    finally:
        producer.close()
    suffix = f" in {transactions} transactions" if args.transactional_id else ""
    print(f"produced {sent} records to {args.topic}{suffix}", file=sys.stderr)
    return 0
