"""``twinlog consume TOPIC``: print records, as text lines or as exact JSON."""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from typing import Any

from twinlog.engine.base.errors import UnknownTopicOrPartitionError
from twinlog.engine.base.wording import counted
from twinlog.rpc.cli.arguments import (
    UsageError,
    key_value_pair,
    non_negative_int,
    positive_int,
)
from twinlog.rpc.cli.common import (
    add_command,
    add_topic_argument,
    connection_options,
    connection_parser,
    retry_policy,
)
from twinlog.rpc.cli.record_json import record_to_json
from twinlog.rpc.cli.text_output import KAFKA_PROPERTIES, TextLayout, apply_property
from twinlog.rpc.client import Admin, Consumer, ConsumerRecord
from twinlog.rpc.client.record_encoding import ENCODINGS

EXAMPLE = """
twinlog consume orders --from-beginning --max-messages 10
twinlog consume orders --print-timestamp --print-key --print-headers --null-literal '<null>'
twinlog consume orders --partition 2 --offset 1000 --format json
twinlog consume orders --from-beginning --format json --idle-timeout-ms 2000 \\
    | twinlog produce orders-copy --format json
twinlog consume orders --group billing --idle-timeout-ms 5000
twinlog consume --include 'orders-.*' --group billing
"""

# "value" and "key-value" are the names of text output before it had --print-key.
FORMATS = ("text", "json", "value", "key-value")


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "consume",
        "print the records of a topic (committed data only)",
        EXAMPLE,
        [connection_parser()],
    )
    add_topic_argument(parser, required=False, help="the topic to read (or --include)")
    parser.add_argument(
        "--include",
        metavar="REGEX",
        help="read every topic whose whole name matches (with --group: topics created later "
        "too); it must match a topic now",
    )
    parser.add_argument("--partition", type=non_negative_int, help="read only this partition")
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the log start; with --group, only where the group has no committed "
        "offset, as in Kafka (default: the group's offset, else the end)",
    )
    start.add_argument(
        "--offset", type=non_negative_int, help="start at this offset (of every partition read)"
    )
    parser.add_argument("--max-messages", type=positive_int, help="exit after this many records")
    parser.add_argument(
        "--group",
        help="consumer group: join it (the group shares the partitions out, as "
        "kafka-console-consumer.sh's), start at and commit its offsets; with --partition or "
        "--offset, read those partitions alone, without joining",
    )
    parser.add_argument(
        "--idle-timeout-ms",
        type=positive_int,
        help="exit when no record came for this long (default: wait forever)",
    )
    output = parser.add_argument_group("output (docs/cli.md)")
    output.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text: one line per record, columns as kafka-console-consumer.sh prints them "
        "(default); json: one exact JSON object per line (value: text, key-value: text "
        "with --print-key)",
    )
    output.add_argument(
        "--encoding",
        choices=ENCODINGS,
        help="how keys, values and header values are written: base64 (default of json) or "
        "text (default of text): UTF-8 with \\\\ for a backslash and \\xHH for other bytes",
    )
    for flag, what in (
        ("--print-timestamp", "CreateTime:MS"),
        ("--print-partition", "Partition:N"),
        ("--print-offset", "Offset:N"),
        ("--print-headers", "the headers, KEY:VALUE,... (NO_HEADERS if none)"),
        ("--print-key", "the key"),
    ):
        output.add_argument(flag, action="store_true", default=None, help=f"text: print {what}")
    output.add_argument(
        "--key-separator",
        "--separator",
        dest="key_separator",
        help="text: between the columns (a tab)",
    )
    output.add_argument("--headers-separator", help="text: between headers (,)")
    output.add_argument(
        "--null-literal", help="text: what a null key, value or header value prints as (null)"
    )
    output.add_argument(
        "--property",
        type=key_value_pair,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="kafka-console-consumer.sh's names: " + ", ".join(KAFKA_PROPERTIES),
    )
    parser.set_defaults(run=run, validate=validate)


TEXT_FLAGS = (
    "print_timestamp",
    "print_partition",
    "print_offset",
    "print_headers",
    "print_key",
    "key_separator",
    "headers_separator",
    "null_literal",
)


def validate(args: argparse.Namespace) -> str | None:
    if (args.topic is None) == (args.include is None):
        return "give a topic or --include REGEX, one of them"
    if args.include is not None:
        try:
            re.compile(args.include)
        except re.error as error:
            return f"--include {args.include!r} is not a regular expression: {error}"
        if args.partition is not None:
            return "--partition applies to one topic, not to --include"
    if args.format == "json":
        given = [name for name in TEXT_FLAGS if getattr(args, name) is not None]
        if given or args.property:
            flag = "--" + given[0].replace("_", "-") if given else "--property"
            return f"{flag} applies to --format text; --format json prints every field"
    return None


def text_layout(args: argparse.Namespace) -> TextLayout:
    layout = TextLayout(encoding=args.encoding or "text", print_key=args.format == "key-value")
    for assignment in args.property:
        try:
            apply_property(layout, assignment)
        except ValueError as error:
            raise UsageError(str(error)) from None
    for name in TEXT_FLAGS:  # the flags win over --property
        value = getattr(args, name)
        if value is not None:
            setattr(layout, name, value)
    return layout


def renderer(args: argparse.Namespace) -> Any:
    if args.format == "json":
        encoding = args.encoding or "base64"
        return lambda record: record_to_json(record, encoding)
    return text_layout(args).render


def _topics(args: argparse.Namespace, admin: Admin) -> list[str]:
    if args.include is None:
        return [args.topic]
    pattern = re.compile(args.include)
    topics = admin.list_topics()
    matched = [name for name in topics if pattern.fullmatch(name)]
    if not matched:
        raise UnknownTopicOrPartitionError(
            f"--include {args.include!r} matches no topic (there are {len(topics)}: "
            f"{', '.join(topics[:10])}{', ...' if len(topics) > 10 else ''}); the whole "
            "name must match"
        )
    return matched


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]]:
    if args.partition is not None:
        return [(args.topic, args.partition)]
    options = connection_options(args)
    with Admin(args.server, connection=options, retry=retry_policy(args)) as admin:
        return [
            (topic, index)
            for topic in _topics(args, admin)
            for index in range(len(admin.describe_topic(topic).partitions))
        ]


def _joins_group(args: argparse.Namespace) -> bool:
    """With --group, the consumer joins it, unless it was told which partitions or offset."""
    return bool(args.group) and args.partition is None and args.offset is None


class _Printed:
    """The count the interrupt summary reads from another thread."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def summary(self) -> str:
        with self.lock:
            return f"interrupted: consumed {counted(self.count, 'record')}"


def run(args: argparse.Namespace) -> int:
    # The count is the summary of a Ctrl-C from here on, while the partitions are still
    # being looked up too (0 records then; a bare "interrupted" said less).
    printed = _Printed()
    interrupts = getattr(args, "interrupts", None)
    if interrupts is not None:
        interrupts.on_interrupt = printed.summary
    render = renderer(args)
    partitions = _partitions(args)
    consumer = Consumer(
        args.server,
        group_id=args.group,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        enable_auto_commit=False,  # committed after printing, below
        connection=connection_options(args),
        retry=retry_policy(args),
    )
    try:
        if _joins_group(args):
            if args.include is not None:
                consumer.subscribe(pattern=args.include)
            else:
                consumer.subscribe([args.topic])
        else:
            consumer.assign(partitions)
        if args.from_beginning and not args.group:
            # With a group, auto_offset_reset="earliest" above applies where it has no
            # committed offset; its committed offsets win (Kafka's console consumer rule).
            consumer.seek_to_beginning()
        elif args.offset is not None:
            for topic_partition in partitions:
                consumer.seek(topic_partition, args.offset)
        _print_records(args, consumer, render, printed)
    finally:
        consumer.close()
    print(f"consumed {counted(printed.count, 'record')}", file=sys.stderr)
    return 0


def _print_records(
    args: argparse.Namespace, consumer: Consumer, render: Any, printed: _Printed
) -> None:
    last_record_s = time.monotonic()
    while args.max_messages is None or printed.count < args.max_messages:
        records: list[ConsumerRecord] = consumer.poll(timeout_ms=500)
        if records:
            last_record_s = time.monotonic()
        rewound: set[tuple[str, int]] = set()
        for record in records:
            if args.max_messages is not None and printed.count >= args.max_messages:
                # Not printed: rewind so that a group commit does not skip it.
                if (record.topic, record.partition) not in rewound:
                    rewound.add((record.topic, record.partition))
                    consumer.seek((record.topic, record.partition), record.offset)
                continue
            print(render(record), flush=False)
            with printed.lock:
                printed.count += 1
        sys.stdout.flush()
        if args.group and records:
            consumer.commit()
        idle_ms = (time.monotonic() - last_record_s) * 1000
        if args.idle_timeout_ms is not None and idle_ms >= args.idle_timeout_ms:
            break
    if args.group:
        consumer.commit()
