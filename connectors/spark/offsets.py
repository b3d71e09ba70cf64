"""Offset options and offset JSON, with Kafka's rules.

    startingOffsets / endingOffsets := "earliest" | "latest" | JSON
    JSON := {"TOPIC": {"PARTITION": OFFSET, ...}, ...}
            OFFSET -2 means earliest, -1 latest (Kafka's sentinels)
    startingTimestamp / endingTimestamp := ms since the epoch, for every partition
    startingOffsetsByTimestamp / endingOffsetsByTimestamp := the JSON shape, with ms values

Precedence (as Kafka's): a timestamp option beats the ByTimestamp JSON, which
beats the offsets option. Rules (as Kafka's):

    batch      start may not be latest (-1): there would be nothing to read
    batch      end may not be earliest (-2)
    streaming  no ending options at all: a stream has no end
    JSON       names exactly the partitions the query reads, no more, no fewer

The same JSON shape is the streaming source's offset in Spark's checkpoint, so a
user can copy an offset from a checkpoint into ``startingOffsets``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from twinlog.connectors.spark.errors import OptionError
from twinlog.connectors.spark.options import Options
from twinlog.engine.base.types import TopicPartition

EARLIEST = -2
LATEST = -1


class SpecKind(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSETS = "offsets"  # per partition, -2 / -1 allowed
    TIMESTAMP = "timestamp"  # one timestamp for every partition
    TIMESTAMPS = "timestamps"  # a timestamp per partition


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end, as the user said it; resolved against the log on the driver."""

    kind: SpecKind
    option: str  # the option it came from, for error messages
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp_ms: int = -1


def parse_offsets_json(option: str, text: str) -> dict[TopicPartition, int]:
    """``{"orders": {"0": 23, "1": -2}}`` to {TopicPartition: 23, ...}; raises OptionError."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise OptionError(
            option,
            f"is not JSON ({error.msg} at character {error.pos}); use e.g. "
            '{"orders":{"0":23,"1":-2}}, or earliest / latest',
        ) from None
    if not isinstance(document, dict):
        raise OptionError(
            option, f'must be a JSON object like {{"orders":{{"0":23}}}}, got {text!r}'
        )
    offsets: dict[TopicPartition, int] = {}
    for topic, partitions in document.items():
        if not isinstance(partitions, dict):
            raise OptionError(
                option, f'topic {topic!r} must map partitions to numbers, like {{"0":23}}'
            )
        for partition, value in partitions.items():
            if not (isinstance(partition, str) and partition.isdigit()):
                raise OptionError(
                    option, f"topic {topic!r}: partition {partition!r} is not a partition number"
                )
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(option, f"{topic}-{partition}: {value!r} is not a whole number")
            offsets[TopicPartition(topic, int(partition))] = value
    return offsets


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The JSON shape (as a dict, sorted) of concrete offsets: Spark's checkpointed offset."""
    document: dict[str, dict[str, int]] = {}
    for partition in sorted(offsets):
        document.setdefault(partition.topic, {})[str(partition.partition)] = offsets[partition]
    return document


def offsets_from_json(document: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """Inverse of ``offsets_to_json`` (a checkpointed offset; trusted, so not re-validated)."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in document.items()
        for partition, offset in partitions.items()
    }


def _timestamp(options: Options, name: str) -> int:
    value = options.integer(name, None)
    assert value is not None
    return value


def _spec(options: Options, side: str, default: SpecKind) -> OffsetSpec:
    """The spec of ``side`` ("starting" or "ending") by Kafka's precedence."""
    timestamp_option = f"{side}Timestamp"
    by_timestamp_option = f"{side}OffsetsByTimestamp"
    offsets_option = f"{side}Offsets"
    if options.has(timestamp_option):
        return OffsetSpec(
            SpecKind.TIMESTAMP, timestamp_option, timestamp_ms=_timestamp(options, timestamp_option)
        )
    if options.has(by_timestamp_option):
        text = options.text(by_timestamp_option) or ""
        stamps = parse_offsets_json(by_timestamp_option, text)
        negative = [str(p) for p, stamp in stamps.items() if stamp < 0]
        if negative:
            raise OptionError(
                by_timestamp_option, f"timestamps must be >= 0 ms; see {', '.join(negative)}"
            )
        return OffsetSpec(SpecKind.TIMESTAMPS, by_timestamp_option, per_partition=stamps)
    text = (options.text(offsets_option) or default.value).strip()
    if text.lower() == "earliest":
        return OffsetSpec(SpecKind.EARLIEST, offsets_option)
    if text.lower() == "latest":
        return OffsetSpec(SpecKind.LATEST, offsets_option)
    offsets = parse_offsets_json(offsets_option, text)
    bad = [str(p) for p, offset in offsets.items() if offset < EARLIEST]
    if bad:
        raise OptionError(
            offsets_option,
            f"offsets must be >= 0, or -2 (earliest) / -1 (latest); see {', '.join(bad)}",
        )
    return OffsetSpec(SpecKind.OFFSETS, offsets_option, per_partition=offsets)


def starting_spec(options: Options, streaming: bool) -> OffsetSpec:
    spec = _spec(options, "starting", SpecKind.LATEST if streaming else SpecKind.EARLIEST)
    if streaming:
        return spec
    if spec.kind is SpecKind.LATEST:
        raise OptionError(
            spec.option,
            "cannot be latest in a batch query (it would read nothing); use earliest, JSON "
            "offsets or a timestamp",
        )
    latest = [str(p) for p, offset in spec.per_partition.items() if offset == LATEST]
    if spec.kind is SpecKind.OFFSETS and latest:
        raise OptionError(
            spec.option,
            f"-1 (latest) is not allowed as a starting offset in a batch query: "
            f"{', '.join(latest)}",
        )
    return spec


def ending_spec(options: Options, streaming: bool) -> OffsetSpec | None:
    """None for a stream (which has no end); raises if a stream was given one."""
    if streaming:
        given = options.present("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
        if given:
            raise OptionError(
                given[0],
                "is for batch queries; a streaming query has no end (use "
                "trigger(availableNow=True) to stop at the offsets present at the start)",
            )
        return None
    spec = _spec(options, "ending", SpecKind.LATEST)
    if spec.kind is SpecKind.EARLIEST:
        raise OptionError(
            spec.option,
            "cannot be earliest in a batch query; use latest, JSON offsets or a timestamp",
        )
    earliest = [str(p) for p, offset in spec.per_partition.items() if offset == EARLIEST]
    if spec.kind is SpecKind.OFFSETS and earliest:
        raise OptionError(
            spec.option,
            f"-2 (earliest) is not allowed as an ending offset: {', '.join(earliest)}",
        )
    return spec


def timestamp_strategy(options: Options) -> str:
    """What a starting timestamp with no record at or after it means: fail, or start at the end."""
    return options.choice("startingOffsetsByTimestampStrategy", "error")


def check_names_partitions(spec: OffsetSpec, partitions: Iterable[TopicPartition]) -> None:
    """Kafka's rule: a JSON spec names exactly the partitions the query reads."""
    if spec.kind not in (SpecKind.OFFSETS, SpecKind.TIMESTAMPS):
        return
    wanted = set(partitions)
    named = set(spec.per_partition)
    missing = sorted(wanted - named)
    extra = sorted(named - wanted)
    if missing or extra:
        problems = []
        if missing:
            problems.append(f"it leaves out {', '.join(map(str, missing))}")
        if extra:
            problems.append(f"it names {', '.join(map(str, extra))}, which the query does not read")
        raise OptionError(
            spec.option,
            "must name every partition the query reads, and only those (use -2 for earliest, "
            "-1 for latest): " + "; ".join(problems),
        )
