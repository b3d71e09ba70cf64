"""``twinlog groups list|describe|delete|reset-offsets|delete-offsets``:
kafka-consumer-groups.sh's tools.

Text tables for reading (``-`` where there is nothing), or ``--format json`` for scripts.
A reset commits from outside the group: the group's coordinator refuses it while the
group has members (NonEmptyGroupError, status 1), so stop the consumers first. Deleting
offsets is refused per partition while a member reads its topic
(GroupSubscribedToTopicError): the table says which, and the status is 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from datetime import datetime
from typing import Any

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import GroupDescription, MemberDescription
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
from twinlog.rpc.client.group_offsets import OffsetReset, PartitionLag, ResetTo

NONE = "-"
DRY_RUN_NOTE = "(dry run: nothing committed)"


def register(subparsers: Any) -> None:
    connection = connection_parser()
    output = output_parser()
    groups = add_command(
        subparsers,
        "groups",
        "list, describe or delete consumer groups, or reset or delete their offsets",
        "twinlog groups list\ntwinlog groups describe billing",
        [],
    )
    commands = groups.add_subparsers(dest="groups_command", required=True, metavar="COMMAND")
    listing = add_command(
        commands,
        "list",
        "list consumer groups: state and member count",
        "twinlog groups list",
        [connection, output],
    )
    listing.set_defaults(run=run_list)
    describe = add_command(
        commands,
        "describe",
        "show a group's committed offsets, log end offsets and lag, or its members",
        "twinlog groups describe billing\ntwinlog groups describe billing --members",
        [connection, output],
    )
    describe.add_argument("group", metavar="GROUP")
    describe.add_argument(
        "--members", action="store_true", help="the members and their partitions instead"
    )
    describe.set_defaults(run=run_describe)
    delete = add_command(
        commands,
        "delete",
        "delete an empty group and its committed offsets",
        "twinlog groups delete billing",
        [connection],
    )
    delete.add_argument("group", metavar="GROUP")
    delete.set_defaults(run=run_delete)
    register_reset(commands, [connection, output])
    register_delete_offsets(commands, [connection, output])


def register_reset(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    reset = add_command(
        commands,
        "reset-offsets",
        "move an empty group's committed offsets (clamped into each partition's earliest..latest)",
        "twinlog groups reset-offsets billing --topic orders --to-earliest --dry-run\n"
        "twinlog groups reset-offsets billing --topic orders:0,2 --shift-by -100\n"
        "twinlog groups reset-offsets billing --topic orders --to-datetime 2026-11-26T10:00:00",
        parents,
    )
    reset.add_argument("group", metavar="GROUP")
    add_topics_argument(reset)
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start")
    target.add_argument("--to-latest", action="store_true", help="the log end")
    target.add_argument("--to-offset", type=whole_number, metavar="N", help="offset N")
    target.add_argument(
        "--to-datetime",
        type=iso_datetime,
        metavar="ISO8601",
        help="where the first batch with a record at or after it starts "
        "(2026-11-26T10:00:00 is UTC; or add +01:00)",
    )
    target.add_argument(
        "--shift-by",
        type=whole_number,
        metavar="N",
        help="the committed offset plus N (negative: back); each partition needs one",
    )
    reset.add_argument("--dry-run", action="store_true", help="show the new offsets only")
    reset.set_defaults(run=run_reset)


def register_delete_offsets(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    delete = add_command(
        commands,
        "delete-offsets",
        "delete a group's committed offsets of some partitions (refused for a topic its "
        "members read)",
        "twinlog groups delete-offsets --group billing --topic orders\n"
        "twinlog groups delete-offsets --group billing --topic orders --partition 0 "
        "--partition 2\n"
        "twinlog groups delete-offsets --group billing --topic orders:0,2 --topic refunds",
        parents,
    )
    delete.add_argument("--group", required=True, metavar="GROUP", help="the consumer group")
    add_topics_argument(delete)
    delete.add_argument(
        "--partition",
        dest="partitions",
        action="append",
        type=partition_number,
        metavar="P",
        help="only this partition of the one --topic; repeatable",
    )
    delete.set_defaults(run=run_delete_offsets)


def add_topics_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--topic",
        dest="topics",
        action="append",
        required=True,
        type=topic_partitions,
        metavar="TOPIC[:P,P...]",
        help="a topic (all its partitions) or some of its partitions; repeatable",
    )


# --- argument types: a bad value is a usage error before anything connects -------------------


def whole_number(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None


def topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """``orders`` (every partition) or ``orders:0,2``; topic names never hold a colon."""
    topic, colon, listed = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P, not {text!r}")
    if not colon:
        return topic, None
    try:
        partitions = [int(item, 10) for item in listed.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected TOPIC:P,P with whole partition numbers, not {text!r}"
        ) from None
    if any(p < 0 for p in partitions):
        raise argparse.ArgumentTypeError(f"partitions are >= 0, not {text!r}")
    return topic, partitions


def partition_number(text: str) -> int:
    number = whole_number(text)
    if number < 0:
        raise argparse.ArgumentTypeError(f"partitions are >= 0, not {text!r}")
    return number


def iso_datetime(text: str) -> datetime:
    """ISO 8601; without an offset it is UTC (not this machine's zone: the same command
    must mean the same instant wherever it runs)."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-11-26T10:00:00 or "
            f"2026-11-26T10:00:00+01:00, not {text!r}"
        ) from None


def reset_target(args: argparse.Namespace) -> ResetTo:
    if args.to_earliest:
        return ResetTo.earliest()
    if args.to_latest:
        return ResetTo.latest()
    if args.to_offset is not None:
        return ResetTo.offset(args.to_offset)
    if args.to_datetime is not None:
        return ResetTo.timestamp(args.to_datetime)
    return ResetTo.shift_by(args.shift_by)


# --- commands ----------------------------------------------------------------------------------


def open_admin(args: argparse.Namespace) -> Admin:
    return Admin(args.server, connection=connection_options(args), retry=retry_policy(args))


def cell(value: object) -> str:
    return NONE if value is None or value == "" else str(value)


def run_list(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        listings = admin.list_groups()
    if args.format == "json":
        # the fields the server sends (a group's Kafka type is the Kafka door's alone)
        print_json(
            [
                {"group_id": g.group_id, "state": g.state, "member_count": g.member_count}
                for g in listings
            ]
        )
    elif not listings:
        print("no consumer groups")
    else:
        print_table(
            [[item.group_id, item.state, str(item.member_count)] for item in listings],
            ["GROUP", "STATE", "MEMBERS"],
        )
    return 0


def run_describe(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        description = admin.describe_group(args.group)
        lags = [] if args.members else admin.group_offsets(args.group)
    if args.format == "json":
        print_json(describe_json(description, lags, args.members))
        return 0
    print(
        f"group {description.group_id}: state {description.state}, epoch "
        f"{description.group_epoch}, {len(description.members)} member(s)"
    )
    if args.members:
        print_members(description.members)
    elif not lags:
        print("no committed offsets and no assigned partitions")
    else:
        print_lags(lags)
    return 0


def describe_json(
    description: GroupDescription, lags: list[PartitionLag], members_only: bool
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "group_id": description.group_id,
        "state": description.state,
        "group_epoch": description.group_epoch,
        "members": [member_json(member) for member in description.members],
    }
    if not members_only:
        found["partitions"] = [dataclasses.asdict(row) for row in lags]
    return found


def member_json(member: MemberDescription) -> dict[str, Any]:
    found = dataclasses.asdict(member)
    for key in ("assigned", "revoking", "target"):  # pairs, not [topic, partition] lists
        found[key] = [partition_json(p) for p in getattr(member, key)]
    return found


def partition_json(partition: TopicPartition) -> dict[str, Any]:
    return {"topic": partition.topic, "partition": partition.partition}


def print_lags(lags: list[PartitionLag]) -> None:
    print_table(
        [
            [
                row.topic,
                str(row.partition),
                cell(row.committed_offset),
                cell(row.log_end_offset),
                cell(row.lag),
                cell(row.member_id),
                cell(row.client_id),
            ]
            for row in lags
        ],
        ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "CLIENT-ID"],
    )


def print_members(members: tuple[MemberDescription, ...]) -> None:
    if not members:
        print("no active members")
        return
    print_table(
        [
            [
                member.member_id,
                cell(member.instance_id),
                cell(member.client_id),
                str(member.member_epoch),
                member.state,
                str(len(member.assigned)),
                ",".join(str(p) for p in member.assigned) or NONE,
            ]
            for member in members
        ],
        ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "EPOCH", "STATE", "#PARTITIONS", "ASSIGNMENT"],
    )


def run_delete(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        admin.delete_group(args.group)
    print(f"deleted group {args.group}")
    return 0


def run_reset(args: argparse.Namespace) -> int:
    to = reset_target(args)
    with open_admin(args) as admin:
        chosen: list[tuple[str, int]] = []
        for topic, partitions in args.topics:
            if partitions is None:  # every partition of the topic, as it is now
                partitions = [p.partition for p in admin.describe_topic(topic).partitions]
            chosen.extend((topic, p) for p in partitions)
        rows = admin.reset_group_offsets(args.group, chosen, to, dry_run=args.dry_run)
    if args.format == "json":
        print_json(
            {
                "group_id": args.group,
                "dry_run": args.dry_run,
                "partitions": [dataclasses.asdict(row) for row in rows],
            }
        )
        return 0
    print_resets(rows)
    if args.dry_run:
        print(DRY_RUN_NOTE)
    return 0


def print_resets(rows: list[OffsetReset]) -> None:
    print_table(
        [
            [row.topic, str(row.partition), cell(row.previous_offset), str(row.new_offset)]
            for row in rows
        ],
        ["TOPIC", "PARTITION", "PREVIOUS", "NEW"],
    )


def run_delete_offsets(args: argparse.Namespace) -> int:
    topics: list[tuple[str, list[int] | None]] = args.topics
    if args.partitions:
        if len(topics) != 1 or topics[0][1] is not None:
            args.command_parser.error(
                "--partition goes with exactly one --topic TOPIC (or write --topic TOPIC:P,P "
                "for each topic)"
            )
        topics = [(topics[0][0], args.partitions)]
    with open_admin(args) as admin:
        chosen: list[tuple[str, int]] = []
        for topic, partitions in topics:
            if partitions is None:  # every partition of the topic, as it is now
                partitions = [p.partition for p in admin.describe_topic(topic).partitions]
            chosen.extend((topic, p) for p in partitions)
        answers = admin.delete_group_offsets(args.group, chosen)
    refused = {p: error for p, error in answers.items() if error is not None}
    if args.format == "json":
        print_json(
            {
                "group_id": args.group,
                "partitions": [
                    {
                        **partition_json(partition),
                        "deleted": error is None,
                        "error": None if error is None else type(error).__name__,
                        "message": None if error is None else str(error),
                    }
                    for partition, error in answers.items()
                ],
            }
        )
    else:
        print_table(
            [
                [
                    partition.topic,
                    str(partition.partition),
                    "deleted" if error is None else f"{type(error).__name__}: {error}",
                ]
                for partition, error in answers.items()
            ],
            ["TOPIC", "PARTITION", "STATUS"],
        )
    if refused:
        print(
            f"error: {len(refused)} of {len(answers)} partition(s) kept their offsets "
            f"(see STATUS); group {args.group}",
            file=sys.stderr,
        )
        return 1
    return 0
