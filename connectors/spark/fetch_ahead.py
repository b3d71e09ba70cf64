"""The next fetch of a read task in flight while the task decodes the last one.

A task took turns: fetch a chunk (fetchMaxBytes) from the broker, decode it,
fetch the next. Where a fetch answer ends is known from its batch headers
alone, so the next fetch is asked for on a second thread at once and waits,
answered, while the task decodes; gRPC waits without holding the GIL.

``next_fetch_offset`` reads lengths and headers only (no CRC): a damaged answer
merely gets no fetch ahead, and is refused by the reader that checks it.

Thread rule: one task uses a FetchAhead; ``close`` it from that task.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.base.types import FetchResult
from twinlog.engine.records.batch_format import (
    LENGTH_PREFIX_BYTES,
    read_length_prefix,
    unpack_header,
)


def next_fetch_offset(records: bytes | memoryview) -> int | None:
    """The offset after the last whole batch of a fetch answer; None if it has none."""
    position, end = 0, len(records)
    last_batch = None
    try:
        while end - position >= LENGTH_PREFIX_BYTES:
            _, batch_length = read_length_prefix(records, position)
            batch_end = position + LENGTH_PREFIX_BYTES + batch_length
            if batch_end > end:
                break  # the partial tail a byte limit cuts
            last_batch = position
            position = batch_end
        return None if last_batch is None else unpack_header(records, last_batch).next_offset
    except CorruptBatchError:
        return None


class FetchAhead:
    """``fetch(offset)`` answers, each asked for one answer ahead when possible."""

    def __init__(self, fetch: Callable[[int], FetchResult]) -> None:
        self._fetch = fetch
        self._threads: ThreadPoolExecutor | None = None
        self._ahead: tuple[int, Future[FetchResult]] | None = None

    def get(self, offset: int) -> FetchResult:
        """The answer at ``offset``: the one fetched ahead if it was for this offset."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == offset:
            return ahead[1].result()  # its error, if it failed, is raised here
        return self._fetch(offset)

    def ask_ahead(self, offset: int) -> None:
        """Start fetching at ``offset`` on the second thread."""
        if self._threads is None:
            self._threads = ThreadPoolExecutor(1, thread_name_prefix="twinlog-fetch-ahead")
        self._ahead = (offset, self._threads.submit(self._fetch, offset))

    def close(self) -> None:
        """Drop what is fetched ahead (a task that stops early); before the broker closes."""
        self._ahead = None
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
            self._threads = None
