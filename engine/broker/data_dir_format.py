"""Which batch format a data directory holds, checked before the broker opens anything in it.

``DATA_DIR/meta`` (topic_registry.py) records ``batch_format``: 2 for Kafka's
RecordBatch v2 with its 61-byte header, the only one this version reads. A
directory whose meta names another format is refused with DataDirFormatError. One
written before the key existed (no ``batch_format``) was written by a version that
may have used the older 67-byte header: the first batch of every segment file under
``logs/`` and ``txn/`` is looked at (engine/log/old_layout.py), and one in the old
layout refuses the directory; else the key is written at this open. The LMDB
journal checks its own ``LAYOUT_VERSION`` (journal/local_format.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from twinlog.engine.base.atomic_file import read_checked
from twinlog.engine.base.errors import DataDirFormatError
from twinlog.engine.log.old_layout import refuse_old_layout

BATCH_FORMAT = 2  # Kafka's RecordBatch v2, 61-byte header: batch_format.py
BATCH_FORMAT_KEY = "batch_format"
LOG_FOLDERS = ("logs", "txn")  # the folders holding data logs, one level down


def stored_batch_format(meta_path: Path) -> int | None:
    """The ``batch_format`` of ``meta_path``; None when the file or the key is missing, or
    the file does not parse (the topic registry then says what is wrong with it)."""
    try:
        document = json.loads(read_checked(meta_path))
        value = document.get(BATCH_FORMAT_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    return None if value is None else int(value)


def check_data_dir_format(data_dir: Path) -> None:
    """Refuse a data directory in a batch format this version does not read; change nothing."""
    meta_path = data_dir / "meta"
    stored = stored_batch_format(meta_path)
    if stored == BATCH_FORMAT:
        return
    if stored is not None:
        raise DataDirFormatError(
            f"{data_dir} holds batch format {stored}; this twinlog reads format {BATCH_FORMAT} "
            "(Kafka's RecordBatch v2) only. Nothing was changed: use the twinlog version that "
            "wrote it, or start with an empty data directory"
        )
    if not meta_path.exists():
        return  # a new data directory
    for folder in LOG_FOLDERS:
        root = data_dir / folder
        if root.is_dir():
            for directory in sorted(root.iterdir()):
                if directory.is_dir():
                    refuse_old_layout(directory)
