"""The segmented data log of a partition: ``DataLog`` to write and serve it,
``LogReader`` to read a log directory without one (e.g. from a Spark job). A
``DataLog`` keeps its segments in a segment list (segment_list.py; the reads by offset
in segment_reads.py).

The on-disk format is described in ``docs/formats.md (Data log)`` and at the top of
files.py, segment.py, segment_index.py, checkpoints.py and recovery.py; log
compaction (cleanup.policy compact) at the top of compaction.py.
"""

from twinlog.engine.log.compaction import CompactionReport, compact
from twinlog.engine.log.config import LogConfig
from twinlog.engine.log.data_log import DataLog
from twinlog.engine.log.group_flush import GroupFlush
from twinlog.engine.log.read_only import LogReader
from twinlog.engine.log.recovery import RecoveryReport

__all__ = [
    "CompactionReport",
    "DataLog",
    "GroupFlush",
    "LogConfig",
    "LogReader",
    "RecoveryReport",
    "compact",
]
