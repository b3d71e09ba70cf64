"""When the next safety-net read of everything is due (the controller's, each broker's roles).

Watches fire once and a session's watches are set again on reconnect, so a read of every
state znode every few seconds only catches what a watch missed. Its cost grows with the
cluster: at 1,000 partitions the roles' and the controller's full reads were half of an
idle broker's CPU (each broker reads its partitions' states, the controller every state),
and at 10,000 they would take more than the machine has. So the pause after a full read
is at least ``FULL_READ_PAUSE_RATIO`` times what it took: the safety net never costs more
than a tenth of its thread's time, and a small cluster keeps its interval as configured.
"""

from __future__ import annotations

FULL_READ_PAUSE_RATIO = 9.0  # pause >= 9 x the read: at most a tenth of the time reading


def next_full_read_s(started_s: float, finished_s: float, interval_s: float) -> float:
    """The monotonic time the next full read is due, for one that ran from ``started_s``
    to ``finished_s``: ``interval_s`` after its start, or later for a long one."""
    assert finished_s >= started_s and interval_s > 0
    return max(
        started_s + interval_s, finished_s + FULL_READ_PAUSE_RATIO * (finished_s - started_s)
    )
