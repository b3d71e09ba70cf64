"""Topics and their configuration, stored in ``DATA_DIR/meta``.

    meta := JSON {"version": 1, "journal_partitions": int,
                  "topics": {name: {"partitions": int, "config": {key: str}}}}

Replaced atomically on every change (``twinlog.engine.base.atomic_file``); a change
that cannot be saved (DiskFullError on a full disk) is not made in memory either. ``journal_partitions``
is fixed when the data directory is created: transaction and producer ids carry
their coordinator partition, so the count can never change afterwards.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import (
    CorruptJournalError,
    InvalidConfigError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)

VERSION = 1
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's rule
PARTITIONS_MAX = 10_000


@dataclass
class TopicMeta:
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


def validate_topic_name(name: str) -> None:
    if not isinstance(name, str) or not TOPIC_NAME.match(name) or name in (".", ".."):
        raise InvalidConfigError(
            f"topic name {name!r} is not valid: use 1..249 characters of letters, digits, "
            "'.', '_' and '-'"
        )


class TopicRegistry:
    """Thread rule: the broker serialises changes (its admin lock); reads may race harmlessly."""

    def __init__(self, path: str | os.PathLike[str], journal_partitions: int) -> None:
        self.path = Path(path)
        self.topics: dict[str, TopicMeta] = {}
        if self.path.exists():
            try:
                stored = json.loads(read_checked(self.path))
                if stored["version"] != VERSION:
                    raise ValueError(f"version {stored['version']}")
                self.journal_partitions = int(stored["journal_partitions"])
                for name, topic in stored["topics"].items():
                    self.topics[name] = TopicMeta(int(topic["partitions"]), dict(topic["config"]))
            except (ValueError, KeyError, TypeError) as error:
                raise CorruptJournalError(
                    f"{self.path}: topic metadata is damaged ({error}); restore it from a backup"
                ) from None
        else:
            self.journal_partitions = journal_partitions
            self._save()

    def _save(self) -> None:
        document = {
            "version": VERSION,
            "journal_partitions": self.journal_partitions,
            "topics": {
                name: {"partitions": topic.partitions, "config": topic.config}
                for name, topic in sorted(self.topics.items())
            },
        }
        replace_file(self.path, with_checksum(json.dumps(document, indent=1).encode()))

    def get(self, name: str) -> TopicMeta:
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(
                f"topic {name!r} does not exist; create it first (twinlog topics create {name})"
            )
        return topic

    def add(self, name: str, partitions: int, config: Mapping[str, str]) -> TopicMeta:
        validate_topic_name(name)
        if name in self.topics:
            raise TopicExistsError(f"topic {name!r} exists already")
        if not isinstance(partitions, int) or not 1 <= partitions <= PARTITIONS_MAX:
            raise InvalidConfigError(
                f"topic {name!r}: partitions is {partitions!r}, expected 1..{PARTITIONS_MAX}"
            )
        topic = TopicMeta(partitions, {str(k): str(v) for k, v in config.items()})
        self.topics[name] = topic
        try:
            self._save()
        except BaseException:  # DiskFullError on a full disk: the file, and we, stay as before
            del self.topics[name]
            raise
        return topic

    def remove(self, name: str) -> None:
        topic = self.get(name)
        del self.topics[name]
        try:
            self._save()
        except BaseException:
            self.topics[name] = topic
            raise
