"""``twinlog demo --serve``: after the play, the demo's broker keeps running for the console.

It leaves what a console should show: the demo's topic and its records, a consumer group
(``payments-audit``) two records behind on every partition, and one transaction left open
(``payments-open``, an hour's timeout) that the console can abort. The broker takes only
the bearer token the demo wrote into its directory; the printed ``twinlog console``
command passes it. Ctrl-C (or SIGTERM) stops the broker gracefully.
"""

from __future__ import annotations

import secrets
import signal
import time
from pathlib import Path
from typing import Any

from twinlog.rpc.client import Admin, Producer
from twinlog.rpc.client.group_offsets import ResetTo

GROUP = "payments-audit"
OPEN_TRANSACTIONAL_ID = "payments-open"
OPEN_TIMEOUT_MS = 60 * 60_000  # an hour to look at it
BROKER_SETTINGS = {"transaction_timeout_ms_max": OPEN_TIMEOUT_MS}
TOKEN_FILE = "demo.token"
TOKENS_FILE = "demo-tokens.txt"
PRINCIPAL = "demo"
LAG_RECORDS = 2


def write_token(directory: Path) -> tuple[str, Path, Path]:
    """(token, the token file for clients, the server's tokens file), both mode 600."""
    token = secrets.token_hex(16)
    token_file, tokens_file = directory / TOKEN_FILE, directory / TOKENS_FILE
    for path, text in ((token_file, token + "\n"), (tokens_file, f"{token} {PRINCIPAL}\n")):
        path.write_text(text)
        path.chmod(0o600)
    return token, token_file, tokens_file


def leave_for_the_console(broker: Any, topic: str, partitions: int) -> Producer:
    """The group with lag and the open transaction; returns the producer holding it open."""
    admin = Admin(broker)
    ends = [p.log_end_offset for p in admin.describe_topic(topic).partitions]
    at = [(topic, p) for p in range(partitions)]
    admin.reset_group_offsets(GROUP, at, ResetTo.offset(max(0, min(ends) - LAG_RECORDS)))
    producer = Producer(
        broker, transactional_id=OPEN_TRANSACTIONAL_ID, transaction_timeout_ms=OPEN_TIMEOUT_MS
    )
    producer.init_transactions()
    producer.begin_transaction()
    for partition in range(min(partitions, 2)):
        producer.send(topic, b"open: never read unless committed", partition=partition)
    producer.flush()
    return producer


def hold(
    say: Any, address: str, token_file: Path, producer: Producer, metrics_url: str | None = None
) -> int:
    """Print the console's command; wait for Ctrl-C or SIGTERM."""
    say("\n8. the broker keeps running for the console (--serve):")
    say(f"   group {GROUP!r} is {LAG_RECORDS} records behind on every partition;")
    say(f"   transaction of {OPEN_TRANSACTIONAL_ID!r} is left open (its timeout: 1 hour).")
    say("   In another terminal run:\n")
    metrics = (
        ""
        if metrics_url is None
        else (f" \\\n       --metrics {metrics_url} --metrics-token-file {token_file}")
    )
    say(f"   twinlog console --server {address} --token-file {token_file}{metrics}\n")
    say("   and open http://127.0.0.1:8080/ . Ctrl-C here stops the broker.")
    stopping: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: stopping.append(number))
    try:
        while not stopping:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        producer.close(timeout_ms=1_000)
    say("\nstopping the broker")
    return 0
