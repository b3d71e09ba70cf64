"""JournalConfig's rules: each limit refused in one line naming the key and what is allowed."""

from __future__ import annotations

import re

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.journal.local_config import MAP_SIZE_BYTES_MIN, JournalConfig


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"map_size_bytes": 4096}, "journal config map_size_bytes is 4096, expected 65536 or more"),
        (
            {"map_size_bytes": 1 << 20, "map_size_bytes_max": 1 << 19},
            "map_size_bytes_max is 524288, expected at least map_size_bytes (1048576)",
        ),
        ({"group_entries_max": 0}, "journal config group_entries_max is 0, expected 1 or more"),
        ({"group_bytes_max": 0}, "group_bytes_max is 0, expected 1 or more"),
        ({"queue_entries_max": 0}, "queue_entries_max is 0, expected 1 or more"),
        ({"read_chunk_bytes": 0}, "read_chunk_bytes is 0, expected 1 or more"),
        ({"max_readers": True}, "max_readers is True, expected an integer 1 or more"),
        ({"sync_mode": "never"}, "sync_mode is 'never', expected one of commit, env_sync, journal"),
        ({"entry_batches": "disk"}, "entry_batches is 'disk', expected one of journal_log, lmdb"),
    ],
)
def test_each_limit_is_refused_in_one_line(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        JournalConfig(**changes)  # type: ignore[arg-type]


def test_the_smallest_map_is_taken() -> None:
    config = JournalConfig(map_size_bytes=MAP_SIZE_BYTES_MIN, map_size_bytes_max=MAP_SIZE_BYTES_MIN)
    assert config.replace(group_entries_max=1).group_entries_max == 1
