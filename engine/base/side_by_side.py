"""Run a few blocking calls at once: the first on the calling thread, the rest on a pool.

For fan-outs that mostly wait (fsyncs of several logs, a transaction's copies into
several partitions): the calling thread takes a share of the work instead of only
waiting, which saves one thread hop and keeps one thread fewer contending for the GIL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, wait


def run_side_by_side(pool: Executor, calls: Sequence[Callable[[], None]]) -> None:
    """Run every call, ``calls[0]`` here and the others on ``pool``; return once all have
    finished, or raise the first failure (in call order) once all have finished, so that
    a retry never runs beside a call still in progress."""
    if not calls:
        return
    futures = [pool.submit(call) for call in calls[1:]]
    first_error: BaseException | None = None
    try:
        calls[0]()
    except BaseException as error:
        first_error = error
    wait(futures)
    for future in futures:
        failure = future.exception()
        if failure is not None and first_error is None:
            first_error = failure
    if first_error is not None:
        raise first_error
