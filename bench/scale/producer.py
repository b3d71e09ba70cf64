"""One producer process of ``bench.scale``: ``python -m bench.scale.producer --bootstrap ...``.

A transactional ``Producer`` with its own transactional id, presenting the token in
``--token-file`` and verifying the servers' certificates with the CA in ``--tls-ca``
when given (the run's security mode, ``bench.scale.security``). Once started it calls
``init_transactions()``, commits its warm-up transactions and prints ``ready``; then,
for each ``go SECONDS`` line on stdin, it commits transactions back to back for that
long and prints one ``result {json}`` line; it exits at the end of stdin.

A transaction: begin, ``records`` sends of ``record_bytes`` random bytes (record i to
partition i mod ``partitions``), flush, commit. The begin, the flush and the commit are
timed alone: the commit is the ``commit_transaction()`` call's round trip, its records
being acknowledged already; the begin waits until the producer's transaction before the
previous one is complete (applied). An error ends that transaction: ``RequestTimedOutError`` leaves
its outcome unknown and ends the count for this process (the producer's state is
unknown too); any other ``TwinlogError`` fails it, and it is aborted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from bench.e2e.workload import Workload
from twinlog.engine.base.collector import freeze_startup_objects
from twinlog.engine.base.errors import RequestTimedOutError, TwinlogError
from twinlog.rpc.client import Producer

ERRORS_KEPT = 5


@dataclass
class CountReport:
    """What this process did during one ``go``."""

    elapsed_s: float = 0.0
    committed: int = 0
    failed: int = 0  # refused or aborted
    unknown: int = 0  # commit outcome unknown
    begin_s: list[float] = field(default_factory=list)
    flush_s: list[float] = field(default_factory=list)
    commit_s: list[float] = field(default_factory=list)
    transaction_s: list[float] = field(default_factory=list)  # begin -> commit answered
    errors: list[str] = field(default_factory=list)


class Committer:
    def __init__(self, producer: Producer, args: argparse.Namespace) -> None:
        self.producer = producer
        self.topic = args.topic
        self.partitions = args.partitions
        self.timeout_ms = args.timeout_ms
        self.payloads = Workload(
            records_per_transaction=args.records, record_bytes=args.record_bytes
        ).payloads()
        self.records = args.records
        self.next_payload = 0

    def commit_one(self, report: CountReport | None) -> None:
        """One transaction; its times go to ``report`` (None: a warm-up)."""
        begun_s = time.monotonic()
        self.producer.begin_transaction()
        sending_s = time.monotonic()
        futures = []
        for index in range(self.records):
            payload = self.payloads[self.next_payload % len(self.payloads)]
            self.next_payload += 1
            futures.append(
                self.producer.send(self.topic, payload, partition=index % self.partitions)
            )
        flush_started_s = time.monotonic()
        self.producer.flush(self.timeout_ms)
        for future in futures:
            error = future.exception(timeout=0)
            if error is not None:
                raise error
        commit_started_s = time.monotonic()
        self.producer.commit_transaction()
        ended_s = time.monotonic()
        if report is not None:
            report.begin_s.append(sending_s - begun_s)
            report.flush_s.append(commit_started_s - flush_started_s)
            report.commit_s.append(ended_s - commit_started_s)
            report.transaction_s.append(ended_s - begun_s)
            report.committed += 1

    def run_for(self, seconds: float) -> CountReport:
        report = CountReport()
        started_s = time.monotonic()
        deadline_s = started_s + seconds
        while time.monotonic() < deadline_s:
            try:
                self.commit_one(report)
            except RequestTimedOutError as error:
                report.unknown += 1
                report.errors.append(f"{type(error).__name__}: {error}"[:300])
                break
            except TwinlogError as error:
                report.failed += 1
                if len(report.errors) < ERRORS_KEPT:
                    report.errors.append(f"{type(error).__name__}: {error}"[:300])
                try:
                    self.producer.abort_transaction()
                except TwinlogError:
                    break
        report.elapsed_s = time.monotonic() - started_s
        return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale.producer")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--timeout-ms", type=int, default=30_000)
    parser.add_argument("--token-file", help="a file holding the bearer token to present")
    parser.add_argument("--tls-ca", help="TLS to the servers, whose certificates this CA signed")
    args = parser.parse_args(argv)
    token = None
    if args.token_file is not None:
        with open(args.token_file, encoding="ascii") as file:
            token = file.read().strip()
    with Producer(
        args.bootstrap,
        transactional_id=args.transactional_id,
        compression="none",
        default_api_timeout_ms=args.timeout_ms,
        token=token,
        tls_ca_file=args.tls_ca,
    ) as producer:
        producer.init_transactions()
        committer = Committer(producer, args)
        for _ in range(args.warmup):
            committer.commit_one(None)
        freeze_startup_objects()
        print("ready", flush=True)
        for line in sys.stdin:
            words = line.split()
            if words[:1] != ["go"]:
                continue
            report = committer.run_for(float(words[1]))
            print("result " + json.dumps(asdict(report)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
