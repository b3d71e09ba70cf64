"""Moving a single-node data directory's transaction journals into ``__txn_journal``, once.

Before one node became a cluster of one, its coordinator N kept its journal in
``DATA_DIR/txn/N/`` (segments, indexes and the ``checkpoint`` pointer file); now it is
partition N of the internal topic ``__txn_journal``, as on a cluster:

    DATA_DIR/txn/N/                  ->  DATA_DIR/logs/__txn_journal-N/
    (no __txn_journal in DATA_DIR/meta)  __txn_journal, journal_partitions partitions

The bytes do not change: both are data logs of the same batch format, and the pointer
file keeps its name beside the segments it points into. Each directory is moved with
one rename (same file system, atomic), so a crash between two leaves some moved and some
not, and the next open finishes the rest; the topic is recorded after the last move,
then ``txn/`` is removed. One log line says what was moved.

Refused, changing nothing, with what to do (``DataDirFormatError``):
    - an entry of ``txn/`` that is not a journal partition of this directory
      (not a directory named 0..journal_partitions-1);
    - a journal partition present both in ``txn/`` and, non-empty, in ``logs/``;
    - a data directory opened with a shared metadata store (a cluster's): a single
      node's journals cannot join a cluster as they are.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from twinlog.engine.base.atomic_file import fsync_directory
from twinlog.engine.base.errors import DataDirFormatError, TopicExistsError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC, TXN_JOURNAL_TOPIC_CONFIG
from twinlog.engine.broker.metadata_store import MetadataStore

log = logging.getLogger(__name__)

OLD_TXN_FOLDER = "txn"


def migrate_txn_journals(data_dir: Path, metadata: MetadataStore, local_metadata: bool) -> int:
    """Move ``DATA_DIR/txn/N`` to ``DATA_DIR/logs/__txn_journal-N`` (see the module); the
    number of journal partitions moved (0: nothing to do)."""
    old_root = data_dir / OLD_TXN_FOLDER
    if not old_root.is_dir():
        return 0
    if not local_metadata:
        raise DataDirFormatError(
            f"{data_dir} holds a single node's transaction journals ({old_root}), but it was "
            "opened as a cluster broker: a single node's journals cannot join a cluster as "
            "they are. Open it as a single node (no --zookeeper), or use an empty data "
            "directory for the cluster broker"
        )
    partitions = metadata.journal_partitions
    moves = _planned_moves(data_dir, old_root, partitions)
    for source, target in moves:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.rmdir()  # empty (checked): the rename needs the name free
        os.rename(source, target)
    if moves:
        fsync_directory(data_dir / "logs")
        fsync_directory(old_root)
    if TXN_JOURNAL_TOPIC not in metadata.topics():
        try:
            metadata.add_topic(TXN_JOURNAL_TOPIC, partitions, dict(TXN_JOURNAL_TOPIC_CONFIG))
        except TopicExistsError:
            pass
    old_root.rmdir()
    fsync_directory(data_dir)
    log.warning(
        "data directory %s: moved %d transaction journal partition(s) from %s/N to "
        "logs/%s-N (a single node is now a cluster of one; done once, the bytes unchanged)",
        data_dir,
        len(moves),
        OLD_TXN_FOLDER,
        TXN_JOURNAL_TOPIC,
    )
    return len(moves)


def _planned_moves(data_dir: Path, old_root: Path, partitions: int) -> list[tuple[Path, Path]]:
    """Every move, checked before the first is made."""
    moves = []
    for entry in sorted(old_root.iterdir()):
        index = int(entry.name) if entry.name.isdigit() else -1
        if not entry.is_dir() or not 0 <= index < partitions:
            raise DataDirFormatError(
                f"cannot move the transaction journals of {data_dir}: {entry} is not one of "
                f"its {partitions} journal partitions (directories 0..{partitions - 1}). "
                "Nothing was changed: move it out of the data directory and open again"
            )
        target = data_dir / "logs" / str(TopicPartition(TXN_JOURNAL_TOPIC, index))
        if target.exists() and any(target.iterdir()):
            raise DataDirFormatError(
                f"cannot move the transaction journal {entry} to {target}: both exist and "
                "hold files, so it is not known which is the journal. Nothing was changed: "
                "keep the one that is (the other aside, out of the data directory) and open "
                "again"
            )
        moves.append((entry, target))
    return moves


__all__ = ["OLD_TXN_FOLDER", "migrate_txn_journals"]
