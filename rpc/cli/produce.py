"""``twinlog produce TOPIC``: stdin lines (text or JSON) as records, every failure reported.

The command ends with 0 only when every record was delivered. Otherwise it prints
``N records not delivered (first failing lines: ...): Error: message`` and exits
with 1; no wait is unbounded: records without an answer within
``--delivery-timeout-ms`` (plus a grace for the answer to travel) count as not
delivered. With ``--transactional-id`` a failed send aborts its transaction (all of
its records are then not delivered) and stops the command. Ctrl-C aborts the open
transaction (given half a second) and exits with 130 (``interrupts.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
import time
from typing import Any

from twinlog.engine.base.errors import RecordTooLargeError, RequestTimedOutError, TwinlogError
from twinlog.engine.base.wording import counted
from twinlog.rpc.cli.arguments import key_value_pair, non_negative_int, positive_int
from twinlog.rpc.cli.common import (
    add_command,
    add_topic_argument,
    connection_options,
    connection_parser,
    retry_policy,
)
from twinlog.rpc.cli.delivery_report import DeliveryTracker
from twinlog.rpc.cli.interrupts import EXIT_INTERRUPTED, InterruptFlag
from twinlog.rpc.cli.produce_input import BadLineError, InputReader
from twinlog.rpc.client import Producer
from twinlog.rpc.client.producer_config import COMPRESSIONS
from twinlog.rpc.client.record_encoding import ENCODINGS

RECORDS_PER_TXN_DEFAULT = 100
PENDING_RECORDS_MAX = 10_000  # wait for answers beyond this many (bounds the memory held)
ANSWER_GRACE_MS = 2_000  # past the delivery timeout: for the answer (or failure) to arrive
ABORT_BUDGET_S = 0.5  # an abort on Ctrl-C (the whole exit takes under a second)
ABORT_AFTER_FAILURE_S = 5.0  # an abort after a failed send, before giving up on it
CLOSE_BUDGET_MS = 1_000

EXAMPLE = """
seq 1 10 | twinlog produce orders
printf 'alice:1\\nbob:2\\n' | twinlog produce orders --key-separator : --header source=import
seq 1 1000 | twinlog produce orders --transactional-id loader --records-per-txn 100
echo '{"key": "k1", "value": null, "headers": [["h", "v"]]}' \\
    | twinlog produce orders --format json --encoding text
"""


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "produce",
        "send each line of stdin as a record",
        EXAMPLE,
        [connection_parser()],
    )
    add_topic_argument(parser, help="the topic to write to")
    parser.add_argument(
        "--partition", type=non_negative_int, help="send every record to this partition"
    )
    parser.add_argument("--transactional-id", help="send in transactions under this id")
    parser.add_argument(
        "--records-per-txn",
        type=positive_int,
        help=f"records per transaction ({RECORDS_PER_TXN_DEFAULT}); needs --transactional-id",
    )
    parser.add_argument("--compression", choices=COMPRESSIONS, default="zstd")
    parser.add_argument("--linger-ms", type=non_negative_int, default=5)
    parser.add_argument(
        "--delivery-timeout-ms",
        type=positive_int,
        help="a record not acknowledged within this long counts as not delivered "
        "(default: --timeout-request-ms)",
    )
    records = parser.add_argument_group("input (docs/cli.md)")
    records.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: each line is a value (default); json: each line is an object "
        '{"key", "value", "headers": [[k, v], ...], "partition", "timestamp_ms"}, '
        "as consume --format json prints",
    )
    records.add_argument(
        "--encoding",
        choices=ENCODINGS,
        help="json: how keys, values and header values are written: base64 (default) or "
        "text (UTF-8 with \\\\ for a backslash and \\xHH for other bytes)",
    )
    records.add_argument(
        "--key-separator", help="text: split each line at the first SEP into key and value"
    )
    records.add_argument(
        "--header",
        type=key_value_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a header of every record (repeatable; the value is UTF-8 text)",
    )
    records.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="json: skip a line that does not parse, and count it (default: stop, exit 2)",
    )
    parser.set_defaults(run=run, validate=validate)


def validate(args: argparse.Namespace) -> str | None:
    """A usage error in the flags (checked before connecting), or None."""
    if args.records_per_txn is not None and not args.transactional_id:
        return (
            "--records-per-txn needs --transactional-id (without it records are not sent in "
            "transactions)"
        )
    if args.format == "json" and args.key_separator is not None:
        return '--key-separator applies to --format text; a JSON line has its "key"'
    if args.format == "text" and (args.encoding or args.skip_bad_lines):
        flag = "--encoding" if args.encoding else "--skip-bad-lines"
        return f"{flag} applies to --format json; a text line is sent as it is"
    return None


def _bounded(call: Any, timeout_s: float) -> tuple[bool, BaseException | None]:
    """Run ``call`` on a thread; (finished in time, its error or None)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
        except BaseException as error:  # handed to the caller
            outcome.append(error)
        else:
            outcome.append(None)

    thread = threading.Thread(target=target, name="twinlog-bounded", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return (bool(outcome), outcome[0] if outcome else None)


class ProduceRun:
    """One ``twinlog produce``: its producer, its tracker, and what to do on Ctrl-C."""

    def __init__(
        self,
        args: argparse.Namespace,
        producer: Producer,
        interrupted: InterruptFlag | None = None,
    ) -> None:
        self.args = args
        self.producer = producer
        self.tracker = DeliveryTracker(transactional=bool(args.transactional_id))
        self.stopping = threading.Event()
        # Set by the interrupt guard's signal handler, on the main thread, at once.
        self.interrupted = interrupted or InterruptFlag()
        # Held while a transaction begins, commits or aborts: Ctrl-C's abort (on another
        # thread) must not race a commit, nor a commit follow it.
        self.ending = threading.Lock()
        self.transactions = 0
        self.line = 0  # the input line being sent
        # The producer's own delivery deadline (run() resolved it), plus the answer's travel.
        self.answer_wait_s = (producer.delivery_timeout_ms + ANSWER_GRACE_MS) / 1000

    # --- the main thread -------------------------------------------------------------------

    def send_all(self, reader: InputReader) -> None:
        args, producer = self.args, self.producer
        in_transaction = False
        for line, record in reader:
            if self.stopping.is_set() or self.interrupted.is_set():
                return
            self.line = line
            if args.transactional_id and not in_transaction:
                with self.ending:
                    if self.stopping.is_set() or self.interrupted.is_set():
                        return
                    producer.begin_transaction()
                in_transaction = True
            partition = record.partition if record.partition is not None else args.partition
            try:
                future = producer.send(
                    args.topic,
                    record.value,
                    key=record.key,
                    partition=partition,
                    headers=record.headers,
                    timestamp_ms=record.timestamp_ms,
                )
            except RecordTooLargeError as error:  # this record only: the others go on
                self.tracker.failed_at_once(line, error)
                if in_transaction:
                    self.abort("a record was too large")
                    return
                continue
            self.tracker.track(future, line)
            if in_transaction and self.tracker.sent % args.records_per_txn == 0:
                if not self.commit():
                    return
                in_transaction = False
            elif not in_transaction and self.tracker.pending >= PENDING_RECORDS_MAX:
                self.wait_for_answers()
        if in_transaction:
            self.commit()
        elif not self.stopping.is_set():
            self.wait_for_answers()

    def wait_for_answers(self) -> bool:
        """Flush, and count the records still unanswered after the bound as not delivered."""
        try:
            self.producer.flush(timeout_ms=int(self.answer_wait_s * 1000))
        except TwinlogError:
            pass  # RequestTimedOutError: the tracker's wait below gives up on them
        if self.tracker.wait_for_answers(timeout_s=0.5):
            return True
        self.tracker.give_up_pending(
            RequestTimedOutError(
                f"no answer from the server within {self.answer_wait_s:g} s (the delivery "
                "timeout and a grace); the record may or may not have been written"
            )
        )
        return False

    def commit(self) -> bool:
        """Commit the open transaction, or abort it if a send failed; True if committed."""
        if not self.wait_for_answers() or self.tracker.first_error is not None:
            self.abort("a send failed")
            return False
        with self.ending:
            if self.stopping.is_set() or self.interrupted.is_set():  # Ctrl-C's to abort
                return False
            try:
                self.producer.commit_transaction()
            except TwinlogError as error:
                failure: TwinlogError | None = error
            else:
                failure = None
                self.tracker.transaction_committed()
        if failure is not None:
            self.abort(f"the commit failed ({type(failure).__name__})", failure)
            return False
        self.transactions += 1
        return True

    def abort(self, why: str, error: BaseException | None = None) -> None:
        """Abort the open transaction after a failure, say so, and stop sending."""
        with self.ending:
            if self.interrupted.is_set():
                return  # Ctrl-C's cleanup aborts it and reports
            self.stopping.set()
            transaction_id = self.producer.transaction_id
            count = self.tracker.transaction_aborted(error)
            if transaction_id is None:
                return
            finished, abort_error = _bounded(self.producer.abort_transaction, ABORT_AFTER_FAILURE_S)
        if finished and abort_error is None:
            outcome = f"aborted transaction {transaction_id}"
        elif finished:
            outcome = (
                f"could not abort transaction {transaction_id} ({type(abort_error).__name__}: "
                f"{abort_error}); the broker aborts it when it times out"
            )
        else:
            outcome = (
                f"could not abort transaction {transaction_id} within "
                f"{ABORT_AFTER_FAILURE_S:g} s; the broker aborts it when it times out"
            )
        print(f"{outcome} after {why}: {_none_read(count)}", file=sys.stderr)

    # --- the interrupt thread ----------------------------------------------------------------

    def on_interrupt(self) -> str:
        self.interrupted.set()
        self.stopping.set()
        started_s = time.monotonic()
        if not self.ending.acquire(timeout=ABORT_BUDGET_S):
            return (
                "interrupted while a transaction was beginning, committing or aborting (its "
                "outcome is unknown: `twinlog txn list` shows it if it is still open); "
                + self.tracker.counts_text()
            )
        parts = []
        transaction_id = self.producer.transaction_id
        if transaction_id is not None:
            budget_s = max(0.1, ABORT_BUDGET_S - (time.monotonic() - started_s))
            finished, error = _bounded(self.producer.abort_transaction, budget_s)
            if finished and error is None:
                parts.append(f"aborted transaction {transaction_id}")
            elif finished:
                parts.append(
                    f"could not abort transaction {transaction_id} ({type(error).__name__}); "
                    "the broker aborts it when it times out"
                )
            else:
                parts.append(
                    f"could not abort transaction {transaction_id} within {ABORT_BUDGET_S:g} s; "
                    "the broker aborts it when it times out"
                )
            self.tracker.transaction_aborted()
        parts.append(self.tracker.counts_text())
        return "interrupted: " + "; ".join(parts)


def run(args: argparse.Namespace) -> int:
    if args.records_per_txn is None:
        args.records_per_txn = RECORDS_PER_TXN_DEFAULT
    # The Producer requires delivery >= linger + one request (as Kafka's does): a shorter
    # --delivery-timeout-ms shortens each request to fit instead of being refused.
    delivery_timeout_ms = args.delivery_timeout_ms or (
        max(args.timeout_request_ms, 1_000) + args.linger_ms
    )
    connection = connection_options(args)
    request_timeout_ms = min(
        connection.request_timeout_ms, max(delivery_timeout_ms - args.linger_ms, 1)
    )
    producer = Producer(
        args.server,
        transactional_id=args.transactional_id,
        compression=args.compression,
        linger_ms=args.linger_ms,
        connection=dataclasses.replace(connection, request_timeout_ms=request_timeout_ms),
        retry=retry_policy(args),
        delivery_timeout_ms=delivery_timeout_ms,
    )
    reader = InputReader(
        sys.stdin.buffer,
        args.format,
        args.encoding or "base64",
        args.key_separator.encode() if args.key_separator else None,
        tuple((key, value.encode()) for key, value in args.header),
        args.skip_bad_lines,
    )
    interrupts = getattr(args, "interrupts", None)
    state = ProduceRun(args, producer, interrupts.interrupted if interrupts else None)
    if interrupts is not None:  # from here on it counts what was sent and delivered
        interrupts.on_interrupt = state.on_interrupt
    try:
        if args.transactional_id:
            producer.init_transactions()
        state.send_all(reader)
        if state.interrupted.is_set():
            return EXIT_INTERRUPTED  # Ctrl-C's cleanup reports, and ends the process
    except BaseException as error:  # a bad line, an error, or Ctrl-C (outside the guard)
        if state.interrupted.is_set():
            return EXIT_INTERRUPTED  # Ctrl-C's cleanup reports, and ends the process
        if producer.transaction_id is not None:
            state.abort(type(error).__name__, error if isinstance(error, TwinlogError) else None)
        elif not isinstance(error, KeyboardInterrupt):
            state.wait_for_answers()  # report what the lines before it became
        if isinstance(error, TwinlogError) and state.line:
            print(
                f"stopped at input line {state.line}: it and the lines after it were not sent",
                file=sys.stderr,
            )
        if state.tracker.sent:
            _report(args, state, reader)
        raise
    finally:
        # Bounded: closing waits for the server's answers, and a stalled server gives none.
        # After Ctrl-C the producer is the cleanup's (it may be aborting).
        if not state.interrupted.is_set():
            _bounded(lambda: producer.close(timeout_ms=CLOSE_BUDGET_MS), CLOSE_BUDGET_MS / 1000)
    return _report(args, state, reader)


def _report(args: argparse.Namespace, state: ProduceRun, reader: InputReader) -> int:
    """Print the summary lines on stderr; the exit status (0: all delivered)."""
    suffix = f" in {counted(state.transactions, 'transaction')}" if args.transactional_id else ""
    delivered = counted(state.tracker.delivered, "record")
    print(f"produced {delivered} to {args.topic}{suffix}", file=sys.stderr)
    skipped = reader.skipped_text()
    if skipped:
        print(skipped, file=sys.stderr)
    failure = state.tracker.failure_line()
    if failure:
        print(failure, file=sys.stderr)
        return 1
    return 0


__all__ = ["BadLineError", "register", "run"]


def _none_read(count: int) -> str:
    """'none of its 2 records is read', or 'its one record is not read' (never '1 records')."""
    return "its one record is not read" if count == 1 else f"none of its {count} records is read"
