"""The segments of a data log at one moment, as a compaction plans from them.

``DataLog.segments_view`` builds one under the log's write lock; ``DataLog.replace_segments``
takes it back with the segments chosen from it and refuses the swap if the log changed
since in a way the view cannot tell (a truncation, a size, the recovery point).

Invariants (asserted where the view is built):

* ``sealed`` are ascending by base offset, all below ``active``'s;
* ``sealed_size_bytes[n]`` is the size of ``sealed[n]`` when the view was taken;
* ``recovery_point_base_offset <= active.base_offset <= log_end_offset``.
"""

from __future__ import annotations

from typing import NamedTuple

from twinlog.engine.log.segment import Segment


class SegmentsView(NamedTuple):
    sealed: tuple[Segment, ...]  # every segment but the active one: what compaction may rewrite
    sealed_size_bytes: tuple[int, ...]  # their sizes then: a swap checks they still hold
    active: Segment  # where appends go; never compacted
    # Recovery rescans this segment and later ones from a byte position, which a
    # rewrite would move: they must not be compacted.
    recovery_point_base_offset: int
    log_end_offset: int
    truncations: int  # the log's truncation count then: a swap after another one is refused
    compaction_turn: int  # the turn it was taken in (0: none); a swap needs the caller's own

    def check(self) -> None:
        """Assert the invariants above (cheap: no file is read)."""
        assert len(self.sealed) == len(self.sealed_size_bytes), self
        offsets = [segment.base_offset for segment in (*self.sealed, self.active)]
        assert offsets == sorted(set(offsets)), offsets
        assert self.recovery_point_base_offset <= self.active.base_offset <= self.log_end_offset, (
            self.recovery_point_base_offset,
            self.active,
            self.log_end_offset,
        )
