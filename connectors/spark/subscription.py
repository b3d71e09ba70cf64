"""Which partitions a read covers: ``subscribe``, ``assign`` or ``subscribePattern`` (one of them).

    subscribe         "orders,payments"        every partition of these topics
    assign            '{"orders":[0,1]}'       exactly these partitions
    subscribePattern  "orders-.*"              every partition of every matching topic

As in Kafka, a pattern must match the whole topic name, and the broker's
internal topics (``__consumer_offsets``) are never matched. A subscription is
resolved against the topics that exist when the driver plans, so a streaming
query with a pattern picks up topics and partitions created later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from twinlog.connectors.spark.errors import OptionError
from twinlog.connectors.spark.options import Options
from twinlog.engine.base.types import TopicPartition

KINDS = ("subscribe", "assign", "subscribePattern")


@dataclass(frozen=True)
class Subscription:
    kind: str  # one of KINDS
    topics: tuple[str, ...] = ()  # subscribe
    assigned: tuple[TopicPartition, ...] = ()  # assign
    pattern: str = ""  # subscribePattern

    def resolve(self, existing: Mapping[str, int]) -> list[TopicPartition]:
        """The partitions to read, given {topic: partition count} of the existing topics."""
        if self.kind == "subscribe":
            missing = [topic for topic in self.topics if topic not in existing]
            if missing:
                raise OptionError(
                    "subscribe",
                    f"topic {missing[0]!r} does not exist; create it first "
                    f"(twinlog topics create {missing[0]})",
                )
            return [TopicPartition(t, p) for t in self.topics for p in range(existing[t])]
        if self.kind == "assign":
            for partition in self.assigned:
                count = existing.get(partition.topic)
                if count is None:
                    raise OptionError(
                        "assign", f"topic {partition.topic!r} does not exist; create it first"
                    )
                if partition.partition >= count:
                    raise OptionError(
                        "assign",
                        f"{partition} does not exist: topic {partition.topic!r} has partitions "
                        f"0..{count - 1}",
                    )
            return list(self.assigned)
        compiled = re.compile(self.pattern)
        return [
            TopicPartition(topic, index)
            for topic in sorted(existing)
            if not topic.startswith("__") and compiled.fullmatch(topic)
            for index in range(existing[topic])
        ]


def parse_subscription(options: Options) -> Subscription:
    given = options.present(*KINDS)
    if len(given) != 1:
        raise OptionError(
            "subscribe",
            "set exactly one of subscribe (topics, comma separated), assign "
            '(JSON like {"orders":[0,1]}) or subscribePattern (a regular expression); '
            + (f"got {', '.join(given)}" if given else "none is set"),
        )
    kind = given[0]
    text = (options.text(kind) or "").strip()
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise OptionError("subscribe", "names no topic; use e.g. orders or orders,payments")
        return Subscription(kind, topics=topics)
    if kind == "assign":
        return Subscription(kind, assigned=_parse_assign(text))
    if not text:
        raise OptionError("subscribePattern", "is empty; use a regular expression like orders-.*")
    try:
        re.compile(text)
    except re.error as error:
        raise OptionError(
            "subscribePattern", f"{text!r} is not a valid regular expression: {error}"
        ) from None
    return Subscription(kind, pattern=text)


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    example = 'use JSON like {"orders":[0,1]}'
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise OptionError("assign", f"is not JSON ({error.msg}); {example}") from None
    if not isinstance(document, dict) or not document:
        raise OptionError("assign", f"must be a non-empty JSON object; {example}")
    assigned: list[TopicPartition] = []
    for topic, partitions in document.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise OptionError("assign", f"topic {topic!r} must map to a list of partition numbers")
        assigned.extend(TopicPartition(topic, p) for p in partitions)
    if not assigned:
        raise OptionError("assign", f"names no partition; {example}")
    return tuple(dict.fromkeys(assigned))
