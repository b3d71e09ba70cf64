"""kcat (librdkafka 2.0, the command-line client from the distribution's packages) against
the Kafka listener: metadata, plain and transactional produce, and reads, alone and in a
consumer group, that see committed records only. kcat is a README prerequisite, which
``.ci/run`` installs."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from twinlog.rpc.client import Producer

pytestmark = pytest.mark.slow  # a kcat process per step
KCAT_TIMEOUT_S = 60
FORMAT = "%p %o %s\\n"  # partition, offset, value: one record a line


def _kcat(*arguments: str, stdin: str = "") -> str:
    kcat = shutil.which("kcat")
    assert kcat is not None, (
        "kcat is not installed: `apt-get install kcat` (a README prerequisite; .ci/run installs it)"
    )
    result = subprocess.run(
        [kcat, *arguments], input=stdin, capture_output=True, text=True, timeout=KCAT_TIMEOUT_S
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kcat_lists_produces_and_reads_committed_records_only(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    bootstrap = ["-b", kafka_server.bootstrap]
    listing = _kcat(*bootstrap, "-L", "-t", topic)
    assert f'topic "{topic}" with 2 partitions' in listing, listing
    _kcat(*bootstrap, "-P", "-t", topic, "-p", "0", stdin="plain-1\nplain-2\n")
    _kcat(
        *bootstrap, "-P", "-t", topic, "-p", "0", "-X", "transactional.id=kcat-tx",
        stdin="in-kcat-transaction\n",
    )  # fmt: skip
    with Producer(kafka_server.broker, transactional_id="beside-kcat") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=1)
        producer.flush()
        producer.abort_transaction()
        with producer.transaction():
            producer.send(topic, b"committed", partition=1)
    expected = {"0 0 plain-1", "0 1 plain-2", "0 2 in-kcat-transaction", "1 0 committed"}
    read = _kcat(*bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", FORMAT)
    assert set(read.splitlines()) == expected, read
    in_group = _kcat(
        *bootstrap, "-G", f"{topic}-kcat", topic, "-o", "beginning", "-e", "-f", FORMAT
    )
    assert set(in_group.splitlines()) == expected, in_group
