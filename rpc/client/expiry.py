"""The error of records that reached their delivery deadline (Kafka's "Expiring N record(s)").

A batch expires when ``delivery_timeout_ms`` has passed since it was created and it
is still queued, or sent and unanswered, or its last attempt failed without an answer
from the server. Its records then fail with RequestTimedOutError (retriable: sending
them again may succeed), never silently. A batch the server did answer, with a
retriable error (DiskFullError, say), fails with that answer instead: it says more
about what to do.
"""

from __future__ import annotations

from twinlog.engine.base.errors import RequestTimedOutError, TwinlogError
from twinlog.rpc.client.accumulator import ProducerBatch
from twinlog.rpc.client.call_deadline import NO_ANSWER_ERRORS


def expiry_error(
    batch: ProducerBatch, now_s: float, *, sent: bool, last_error: TwinlogError | None = None
) -> RequestTimedOutError:
    """``sent``: whether the batch ever went to the server (then its fate is unknown)."""
    topic, partition = batch.topic_partition
    delivery_timeout_ms = round((batch.deadline_s - batch.created_s) * 1000)
    waited_ms = round((now_s - batch.created_s) * 1000)
    if sent:
        outcome = "the server did not answer; they may or may not have been written"
    else:
        outcome = (
            "they were never sent (the partition's previous batch was unanswered, or the "
            "server unreachable), so they were not written"
        )
    text = (
        f"{batch.record_count} record(s) for {topic}-{partition} expired after "
        f"delivery_timeout_ms={delivery_timeout_ms}: {waited_ms} ms have passed since the "
        f"batch was created and {outcome}"
    )
    if last_error is not None:
        text += f" (last error: {type(last_error).__name__}: {last_error})"
    error = RequestTimedOutError(text)
    error.__cause__ = last_error
    return error


def deadline_error(
    batch: ProducerBatch, now_s: float, *, sent: bool, last_error: TwinlogError | None = None
) -> TwinlogError:
    """What a batch fails with at its delivery deadline: the server's latest answer (an
    error, as it was retried), or the expiry error when the server gave none.
    ``last_error``: of the attempt that just ended, if one did."""
    for answer in (last_error, batch.last_error):
        if answer is not None and not isinstance(answer, NO_ANSWER_ERRORS):
            return answer
    return expiry_error(batch, now_s, sent=sent, last_error=last_error or batch.last_error)
