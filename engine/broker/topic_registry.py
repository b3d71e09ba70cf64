"""Topics, their ids and their configuration, stored in ``DATA_DIR/meta``.

    meta := JSON {"version": 2, "journal_partitions": int, "batch_format": 2,
                  "cluster_id": hex32, "data_dir_id": hex32,          (optional)
                  "topics": {name: {"id": hex32, "partitions": int, "config": {key: str}}}}

``batch_format`` names the record batch layout the directory's logs hold; it is
checked before the broker opens anything (data_dir_format.py), and written here.

A topic's id (Kafka's KIP-516 topic id) is a random 16-byte UUID given when it is
created and kept for its life: a topic deleted and created again under the same
name is another topic. Version 1 files (no ids) are read, and every topic gets
an id on that first open, written back at once as version 2.

Replaced atomically on every change (``twinlog.engine.base.atomic_file``); a change
that cannot be saved (DiskFullError on a full disk) is not made in memory either. ``journal_partitions``
is fixed when the data directory is created: transaction and producer ids carry
their coordinator partition, so the count can never change afterwards.

``cluster_id`` and ``data_dir_id`` (random, as topic ids) are given by the broker's
``LocalMetadataStore`` at its first open (``ensure_identity``); a reader that only
reads (the Spark connector) never writes the file. Files without them are read as
having none, and older brokers ignore them.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import (
    CorruptJournalError,
    InvalidConfigError,
    InvalidPartitionsError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.broker.data_dir_format import BATCH_FORMAT, BATCH_FORMAT_KEY

VERSION = 2
VERSIONS_READ = (1, 2)  # 1: before topic ids
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's rule
PARTITIONS_MAX = 10_000


def check_growth(name: str, current: int, wanted: object) -> None:
    """InvalidPartitionsError unless ``wanted`` is a partition count ``name`` may grow to
    from ``current``: more, and at most PARTITIONS_MAX (topics never shrink: a record's
    partition is part of its address)."""
    if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted <= current:
        raise InvalidPartitionsError(
            f"topic {name!r} has {current} partitions; it can only grow: ask for more than "
            f"{current} (not {wanted!r})"
        )
    if wanted > PARTITIONS_MAX:
        raise InvalidPartitionsError(
            f"topic {name!r}: {wanted} partitions is above the limit of {PARTITIONS_MAX}"
        )


def new_topic_id() -> str:
    """A random 16-byte UUID (version 4), as 32 hex digits."""
    return uuid.uuid4().hex


@dataclass
class TopicMeta:
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
    topic_id: str = field(default_factory=new_topic_id)
    # The store's version of this topic (ZooKeeper's zkVersion); a local topic is never
    # changed after its creation, so it stays 0. Not in the file.
    version: int = 0


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
        self.cluster_id = ""  # "": not given yet
        self.data_dir_id = ""
        self._batch_format_stored = False
        if self.path.exists():
            try:
                stored = json.loads(read_checked(self.path))
                if stored["version"] not in VERSIONS_READ:
                    raise ValueError(f"version {stored['version']}")
                self.journal_partitions = int(stored["journal_partitions"])
                self.cluster_id = _stored_id(stored, "cluster_id")
                self.data_dir_id = _stored_id(stored, "data_dir_id")
                for name, topic in stored["topics"].items():
                    self.topics[name] = TopicMeta(
                        int(topic["partitions"]),
                        dict(topic["config"]),
                        _stored_topic_id(topic) if stored["version"] >= 2 else new_topic_id(),
                    )
            except (ValueError, KeyError, TypeError) as error:
                raise CorruptJournalError(
                    f"{self.path}: topic metadata is damaged ({error}); restore it from a backup"
                ) from None
            # A file from before ``batch_format`` gets it from the broker's store
            # (``ensure_identity``), never from a read-only reader such as the Spark connector.
            self._batch_format_stored = stored.get(BATCH_FORMAT_KEY) == BATCH_FORMAT
            if stored["version"] != VERSION:
                self._save()  # the ids just given must be the same at every later open
        else:
            self.journal_partitions = journal_partitions
            self._save()

    def ensure_identity(self) -> None:
        """Give the directory its ``cluster_id`` and ``data_dir_id`` if it has none yet (and
        write ``batch_format`` into a file from before it: the broker checked the logs)."""
        if self.cluster_id and self.data_dir_id and self._batch_format_stored:
            return
        before = self.cluster_id, self.data_dir_id
        self.cluster_id = self.cluster_id or new_topic_id()
        self.data_dir_id = self.data_dir_id or new_topic_id()
        try:
            self._save()
        except BaseException:  # DiskFullError: none given, the next open tries again
            self.cluster_id, self.data_dir_id = before
            raise

    def _save(self) -> None:
        identity = {"cluster_id": self.cluster_id, "data_dir_id": self.data_dir_id}
        document = {
            "version": VERSION,
            "journal_partitions": self.journal_partitions,
            **{key: value for key, value in identity.items() if value},
            BATCH_FORMAT_KEY: BATCH_FORMAT,
            "topics": {
                name: {"id": topic.topic_id, "partitions": topic.partitions, "config": topic.config}
                for name, topic in sorted(self.topics.items())
            },
        }
        replace_file(self.path, with_checksum(json.dumps(document, indent=1).encode()))
        self._batch_format_stored = True

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

    def grow(self, name: str, partitions: int) -> TopicMeta:
        topic = self.get(name)
        check_growth(name, topic.partitions, partitions)
        before = topic.partitions
        topic.partitions = partitions
        try:
            self._save()
        except BaseException:
            topic.partitions = before
            raise
        return topic

    def set_config(self, name: str, config: Mapping[str, str]) -> TopicMeta:
        topic = self.get(name)
        before = topic.config
        topic.config = {str(k): str(v) for k, v in config.items()}
        try:
            self._save()
        except BaseException:
            topic.config = before
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


def _stored_topic_id(topic: Mapping[str, object]) -> str:
    topic_id = topic["id"]
    if not isinstance(topic_id, str) or len(bytes.fromhex(topic_id)) != 16:
        raise ValueError(f"topic id {topic_id!r} is not 32 hex digits")
    return topic_id


def _stored_id(stored: Mapping[str, object], key: str) -> str:
    """An optional 32-hex-digit id of the file; "" when absent."""
    value = stored.get(key, "")
    if value and (not isinstance(value, str) or len(bytes.fromhex(value)) != 16):
        raise ValueError(f"{key} {value!r} is not 32 hex digits")
    return str(value)
