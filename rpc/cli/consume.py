"""``twinlog consume TOPIC``: print records."""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from typing import Any

from twinlog.rpc.cli.common import add_command, connection_options, connection_parser, retry_policy
from twinlog.rpc.client import Admin, Consumer, ConsumerRecord

EXAMPLE = """
twinlog consume orders --from-beginning --max-messages 10
twinlog consume orders --partition 2 --offset 1000 --format json
twinlog consume orders --group billing --idle-timeout-ms 5000
"""

FORMATS = ("value", "key-value", "json")


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "consume",
        "print the records of a topic (committed data only)",
        EXAMPLE,
        [connection_parser()],
    )
    parser.add_argument("topic")
    parser.add_argument("--partition", type=int, help="read only this partition")
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the log start; with --group, only where the group has no committed "
        "offset, as in Kafka (default: the group's offset, else the end)",
    )
    start.add_argument("--offset", type=int, help="start at this offset (of every partition read)")
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument("--group", help="consumer group: start at and commit its offsets")
    parser.add_argument(
        "--idle-timeout-ms",
        type=int,
        help="exit when no record came for this long (default: wait forever)",
    )
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=FORMATS, default="value", help="value (default)")
    output.add_argument("--separator", default="\t", help="between key and value (tab)")
    output.add_argument(
        "--print-offset", action="store_true", help="prefix partition:offset to each line"
    )
    parser.set_defaults(run=run)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def render(record: ConsumerRecord, args: argparse.Namespace) -> str:
    if args.format == "json":
        return json.dumps(
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp_ms": record.timestamp_ms,
                "key": _text(record.key),
                "value": _text(record.value),
                "headers": {
                    key: None if value is None else base64.b64encode(value).decode()
                    for key, value in record.headers
                },
            }
        )
    text = _text(record.value) or ""
    if args.format == "key-value":
        text = f"{_text(record.key) or ''}{args.separator}{text}"
    if args.print_offset:
        text = f"{record.partition}:{record.offset}{args.separator}{text}"
    return text


def run(args: argparse.Namespace) -> int:
    options = connection_options(args)
    if args.partition is None:
        with Admin(args.server, connection=options, retry=retry_policy(args)) as admin:
            count = len(admin.describe_topic(args.topic).partitions)
        partitions = [(args.topic, index) for index in range(count)]
    else:
        partitions = [(args.topic, args.partition)]
    consumer = Consumer(
        args.server,
        group_id=args.group,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        connection=options,
        retry=retry_policy(args),
    )
    printed = 0
    try:
        consumer.assign(partitions)
        if args.from_beginning and not args.group:
            # With a group, auto_offset_reset="earliest" above applies where it has no
            # committed offset; its committed offsets win (Kafka's console consumer rule).
            consumer.seek_to_beginning()
        elif args.offset is not None:
            for topic_partition in partitions:
                consumer.seek(topic_partition, args.offset)
        last_record_s = time.monotonic()
        while args.max_messages is None or printed < args.max_messages:
            records = consumer.poll(timeout_ms=500)
            if records:
                last_record_s = time.monotonic()
            rewound: set[tuple[str, int]] = set()
            for record in records:
                if args.max_messages is not None and printed >= args.max_messages:
                    # Not printed: rewind so that a group commit does not skip it.
                    if (record.topic, record.partition) not in rewound:
                        rewound.add((record.topic, record.partition))
                        consumer.seek((record.topic, record.partition), record.offset)
                    continue
                print(render(record, args), flush=False)
                printed += 1
            sys.stdout.flush()
            if args.group and records:
                consumer.commit()
            idle_ms = (time.monotonic() - last_record_s) * 1000
            if args.idle_timeout_ms is not None and idle_ms >= args.idle_timeout_ms:
                break
        if args.group:
            consumer.commit()
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    print(f"consumed {printed} records", file=sys.stderr)
    return 0
