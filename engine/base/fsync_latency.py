"""How long the engine's fsyncs take, per kind of file: process-wide latency histograms.

A slow disk shows here first: every acknowledged produce and every transaction
decision waits for one of these. Process-wide rather than per broker, because the
disk is (a process embedding two brokers sees the fsyncs of both).

    LOG_SEGMENT     fsync of a log segment's data: data logs and transaction journals
                    (``twinlog.engine.log.segment.Segment.flush``)
    LOCAL_JOURNAL   commit and sync of one LMDB write group of the local data journal
                    (``twinlog.journal.local_writer``)
"""

from __future__ import annotations

from twinlog.engine.base.latency_histogram import LatencyHistogram

LOG_SEGMENT = LatencyHistogram()
LOCAL_JOURNAL = LatencyHistogram()

# Label value -> histogram, for whoever exports them.
BY_KIND: dict[str, LatencyHistogram] = {
    "log_segment": LOG_SEGMENT,
    "local_journal": LOCAL_JOURNAL,
}
