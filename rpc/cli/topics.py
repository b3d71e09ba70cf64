"""``twinlog topics create|list|describe|alter|delete|delete-records``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from twinlog.engine.base.types import REPLICATION_FACTOR_SETTING, TopicPartition
from twinlog.engine.base.wording import counted
from twinlog.rpc.cli.arguments import UsageError, non_negative_int, positive_int
from twinlog.rpc.cli.common import (
    add_command,
    add_topic_argument,
    connection_options,
    connection_parser,
    output_parser,
    print_json,
    print_table,
    retry_policy,
)
from twinlog.rpc.client import Admin
from twinlog.rpc.server.config import parse_pairs

SOURCES = {True: "set on the topic", False: "broker default"}


def register(subparsers: Any) -> None:
    connection = connection_parser()
    topics = add_command(
        subparsers,
        "topics",
        "create, list, describe, alter or delete topics, or delete their oldest records",
        "twinlog topics create orders --partitions 4\ntwinlog topics list",
        [],
    )
    commands = topics.add_subparsers(dest="topics_command", required=True, metavar="COMMAND")
    create = add_command(
        commands,
        "create",
        "create a topic",
        "twinlog topics create orders --partitions 4 --config retention.ms=86400000\n"
        "twinlog topics create orders --partitions 4 --replication-factor 3 \\\n"
        "    --server 127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003",
        [connection],
    )
    add_topic_argument(create, "name")
    create.add_argument("--partitions", type=int, default=1, help="number of partitions (1)")
    create.add_argument(
        "--replication-factor",
        type=positive_int,
        help="copies of each partition on a cluster (the topic setting replication.factor; "
        "default: the cluster's)",
    )
    create.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="topic setting"
    )
    create.set_defaults(run=run_create)
    listing = add_command(
        commands,
        "list",
        "list topics",
        "twinlog topics list\ntwinlog topics list --format json",
        [connection, output_parser()],
    )
    listing.set_defaults(run=run_list)
    describe = add_command(
        commands,
        "describe",
        "show a topic's partitions: log start/end offsets, pending journal entries",
        "twinlog topics describe orders\ntwinlog topics describe orders --format json",
        [connection, output_parser()],
    )
    add_topic_argument(describe, "name")
    describe.set_defaults(run=run_describe)
    alter = add_command(
        commands,
        "alter",
        "give a topic more partitions (it never shrinks), or change its settings live",
        "twinlog topics alter orders --partitions 8\n"
        "twinlog topics alter orders --config retention.ms=3600000 --delete-config segment.bytes",
        [connection],
    )
    add_topic_argument(alter, "name")
    alter.add_argument(
        "--partitions",
        type=positive_int,
        help="the partition count in all, above the topic's",
    )
    alter.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting to set (repeatable); taken by every replica without a restart",
    )
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY",
        help="a setting back to the broker's default (repeatable)",
    )
    alter.set_defaults(run=run_alter, validate=_validate_alter)
    delete = add_command(
        commands,
        "delete",
        "delete a topic and its data",
        "twinlog topics delete orders",
        [connection],
    )
    add_topic_argument(delete, "name")
    delete.set_defaults(run=run_delete)
    delete_records = add_command(
        commands,
        "delete-records",
        "delete a partition's records below an offset (Kafka's kafka-delete-records.sh): "
        "its log starts there from now on; needs DELETE on the topic",
        "twinlog topics delete-records orders --partition 0 --before 1500\n"
        "twinlog topics delete-records orders --partition 3 --before -1   # all committed",
        [connection],
    )
    add_topic_argument(delete_records, "name")
    delete_records.add_argument(
        "--partition", type=non_negative_int, required=True, help="the partition"
    )
    delete_records.add_argument(
        "--before",
        type=int,
        required=True,
        metavar="OFFSET",
        help="delete the records below this offset, at most the high watermark; -1: up to "
        "the high watermark (every committed record)",
    )
    delete_records.set_defaults(run=run_delete_records, validate=_validate_delete_records)


def run_create(args: argparse.Namespace) -> int:
    config = parse_pairs(args.config, "--config")
    if args.replication_factor is not None:
        if REPLICATION_FACTOR_SETTING in config or "replication_factor" in config:
            raise UsageError(
                f"--replication-factor and --config {REPLICATION_FACTOR_SETTING}= both set it; give one"
            )
        config[REPLICATION_FACTOR_SETTING] = str(args.replication_factor)
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        description = admin.create_topic(args.name, args.partitions, config or None)
    factor = config.get(REPLICATION_FACTOR_SETTING)
    print(
        f"created topic {description.name} with {counted(len(description.partitions), 'partition')}"
        + (f" (replication factor {factor})" if factor else "")
    )
    return 0


def run_list(args: argparse.Namespace) -> int:
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        names = admin.list_topics()
    if args.format == "json":
        print_json(names)
        return 0
    for name in names:
        print(name)
    return 0


def run_describe(args: argparse.Namespace) -> int:
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        description = admin.describe_topic(args.name)
        settings = admin.topic_settings(args.name)
    if args.format == "json":
        print_json(
            {
                **dataclasses.asdict(description),
                "settings": [
                    {"name": name, "value": value, "source": SOURCES[given]}
                    for name, value, given in settings
                ],
            }
        )
        return 0
    print(
        f"topic {description.name} (id {description.topic_id}): "
        f"{counted(len(description.partitions), 'partition')}"
    )
    for name, value, given in settings:
        print(f"  {name}={value} ({SOURCES[given]})")
    print_table(
        [
            [
                str(item.partition),
                str(item.log_start_offset),
                str(item.log_end_offset),
                str(item.journal_entries_pending),
                str(item.journal_bytes_pending),
            ]
            for item in description.partitions
        ],
        ["partition", "log_start", "log_end", "journal_entries", "journal_bytes"],
    )
    return 0


def _validate_alter(args: argparse.Namespace) -> str | None:
    if args.partitions is None and not args.config and not args.delete_config:
        return "say what to change: --partitions N, --config KEY=VALUE or --delete-config KEY"
    return None


def run_alter(args: argparse.Namespace) -> int:
    settings = parse_pairs(args.config, "--config")
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        if args.partitions is not None:
            description = admin.create_partitions(args.name, args.partitions)
            print(
                f"topic {description.name} has "
                f"{counted(len(description.partitions), 'partition')} now; records with a key "
                "may go to another partition than before (the default partitioner hashes the "
                "key over the partition count), so a key's order holds only from here on"
            )
        if settings or args.delete_config:
            description = admin.alter_topic_config(args.name, settings, args.delete_config)
            shown = ", ".join(f"{k}={v}" for k, v in sorted(description.config.items()))
            print(f"topic {description.name} settings: {shown or 'the broker defaults'}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        admin.delete_topic(args.name)
    print(f"deleted topic {args.name}")
    return 0


def _validate_delete_records(args: argparse.Namespace) -> str | None:
    if args.before < -1:
        return f"--before {args.before}: give an offset (0 or more), or -1 for the high watermark"
    return None


def run_delete_records(args: argparse.Namespace) -> int:
    key = (args.name, args.partition)
    with Admin(args.server, connection=connection_options(args), retry=retry_policy(args)) as admin:
        low_watermark = admin.delete_records({key: args.before})[TopicPartition(*key)]
    print(f"{args.name}-{args.partition}: low watermark {low_watermark}")
    if args.before != -1 and low_watermark < args.before:
        print(
            f"records from {low_watermark} on are kept for now: a transaction's copy starting "
            "there is not yet recorded as applied; run the command again shortly"
        )
    return 0
