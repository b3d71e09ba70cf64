"""Settings of the local data journal, with units in every name; the limits live here.

field                     default   meaning
map_size_bytes            256 MiB   initial LMDB map; it grows (doubling) when full
map_size_bytes_max        1 TiB     growth stops here: appends then fail with DiskFullError
group_entries_max         1024      requests gathered into one write transaction at most
group_bytes_max           64 MiB    batch bytes gathered into one write transaction at most
queue_entries_max         4096      requests waiting for the writer; callers block beyond
read_chunk_bytes          16 MiB    a streaming read (the copier) renews its read
                                    transaction after this many bytes, so a map resize
                                    never waits longer than one chunk
sync_mode                 "commit"  "commit": LMDB syncs inside each group's commit
                                    (data pages fsynced before the meta page is written:
                                    a power loss can lose nothing acknowledged and can
                                    not tear the tree). "env_sync": commit unsynced, then
                                    one env.sync(True) per group (one fdatasync instead
                                    of two, but the meta page may reach the disk before
                                    the data pages it points to: kept for measurement)
                                    "journal_log": LMDB never syncs at commit: the
                                    journal logs (fsynced by the writer before each
                                    group is applied) are the durable copy; LMDB is
                                    synced before journal-log retention and at close,
                                    and replays from its applied offsets after a crash
                                    (docs/formats.md, "LMDB durability")
max_readers               126       LMDB reader slots (threads with a read txn at once)
entry_batches             "journal_log"  where an entry's batch bytes live, once journal logs
                                    are in front of LMDB: "journal_log": only there (LMDB
                                    names the ENTRY record: ENTRY_FORMAT_IN_LOG, every
                                    journaled byte written once); "lmdb": also copied into
                                    LMDB (ENTRY_FORMAT_INLINE, the layout before; kept for
                                    measurement and for tests of the map's growth). Both
                                    formats are always read. LMDB used alone keeps them inline.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from twinlog.engine.base.config_rules import POSITIVE, ConfigRules, Integer, OneOf
from twinlog.engine.base.units import MEBIBYTE

SYNC_COMMIT = "commit"
SYNC_ENV = "env_sync"
SYNC_LOG = "journal_log"
SYNC_MODES = (SYNC_COMMIT, SYNC_ENV, SYNC_LOG)
BATCHES_IN_LOG = "journal_log"
BATCHES_IN_LMDB = "lmdb"
ENTRY_BATCHES = (BATCHES_IN_LOG, BATCHES_IN_LMDB)
PAGE_BYTES = 4096
MAP_SIZE_BYTES_MIN = 16 * PAGE_BYTES  # an LMDB map smaller than this holds next to nothing


@dataclass(frozen=True)
class JournalConfig:
    map_size_bytes: int = 256 * MEBIBYTE
    map_size_bytes_max: int = 1 << 40
    group_entries_max: int = 1024
    group_bytes_max: int = 64 * MEBIBYTE
    queue_entries_max: int = 4096
    read_chunk_bytes: int = 16 * MEBIBYTE
    sync_mode: str = SYNC_COMMIT
    max_readers: int = 126
    entry_batches: str = BATCHES_IN_LOG

    def __post_init__(self) -> None:
        RULES.check(self)
        if self.map_size_bytes_max < self.map_size_bytes:
            raise RULES.refuse(
                "map_size_bytes_max",
                self.map_size_bytes_max,
                f"at least map_size_bytes ({self.map_size_bytes})",
            )

    def replace(self, **changes: Any) -> JournalConfig:
        return dataclasses.replace(self, **changes)


RULES = ConfigRules(
    "journal config",
    {
        "map_size_bytes": Integer(MAP_SIZE_BYTES_MIN),
        "map_size_bytes_max": POSITIVE,  # and at least map_size_bytes
        "group_entries_max": POSITIVE,
        "group_bytes_max": POSITIVE,
        "queue_entries_max": POSITIVE,
        "read_chunk_bytes": POSITIVE,
        "sync_mode": OneOf(SYNC_MODES),
        "max_readers": POSITIVE,
        "entry_batches": OneOf(ENTRY_BATCHES),
    },
)
