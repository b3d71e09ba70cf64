"""Forged internal calls against a secured ``FaultCluster``: the nemesis's attacker.

    attacker = InternalAttacker(cluster, directory, topic)
    attacker.round(rng, strict=True)     # every forgery at every door of every broker
    attacker.tally                       # what each got

Brokers serve replication and coordination only on their inter-broker listener, with
mutual TLS, to a certificate the cluster CA signed for a broker name; the client port
does not serve them at all. The attacker knows everything but a broker's key: the
brokers' addresses, the cluster CA's certificate, a real follower's id, the topics.
Its callers:

    plain           plain text, no credentials
    client-token    plain text with the ``attacker`` principal's valid token
    foreign-ca      TLS with a certificate named ``twinlog-broker-2`` from another CA
    cluster-alice   TLS with a certificate the cluster CA signed, CN=alice (not a broker)

Its forgeries (``FORGERIES``): a Replication ``Fetch`` in a real follower's name with a
huge broker epoch and an offset far past the log's end (would move the high watermark);
Coordination ``ApplyCommit``, ``ApplyCommits`` (a copy group of two), ``ApplyAbort``
and ``CountEntries`` with a huge coordinator epoch; ``SettleOffsetsHolder`` (would abort a transaction holding a group's
offsets); ``LookupProducer`` (would tell a producer id's owner). Each is sent to every
broker's client port (by ``plain`` and ``client-token``: no TLS there) and inter-broker
listener (by every caller), straight to the broker (never through a cut link).

What must come back (``EXPECTED``): UNIMPLEMENTED at a client port; at an inter-broker
listener UNAVAILABLE (no TLS, or a certificate of another CA: the handshake fails) or
PERMISSION_DENIED / UNAUTHENTICATED (a certificate naming no broker). An answer (OK) is
an ``accepted`` forgery: the anomaly. A broker that is down or paused answers nothing,
or UNAVAILABLE, which is ambiguous at the inter-broker door; ``round(strict=True)`` is
called only while every broker runs (right after a heal), and then any code outside
``EXPECTED`` is an ``unexpected`` anomaly too; otherwise it is counted as unanswered.

No tests here. Thread rule: one thread per attacker.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from cluster_faults import FaultCluster
from cluster_security import ATTACKER
from pki_support import openssl

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.replication.fetch_calls import ReplicaFetch, ReplicaFetchPartition
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CallEpochs,
    CountEntries,
    LookupProducer,
    SettleOffsetsHolder,
)
from twinlog.rpc.cli.cluster_certs import make_broker_certificates
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2_grpc, replication_pb2_grpc
from twinlog.rpc.replication import coordination_convert
from twinlog.rpc.replication.broker_identity import broker_name
from twinlog.rpc.replication.convert import fetch_to_proto
from twinlog.rpc.wire.metadata import AUTHORIZATION_KEY

HUGE_EPOCH = 2**30
HUGE_OFFSET = 2**40
CALL_TIMEOUT_S = 3.0
CLIENT_PORT = "client-port"
INTER_BROKER_PORT = "inter-broker-port"
PLAIN = "plain"
CLIENT_TOKEN = "client-token"
FOREIGN_CA = "foreign-ca"
CLUSTER_ALICE = "cluster-alice"
CALLERS = (PLAIN, CLIENT_TOKEN, FOREIGN_CA, CLUSTER_ALICE)
TLS_CALLERS = (FOREIGN_CA, CLUSTER_ALICE)
FETCH = "Replication.Fetch"
APPLY_COMMIT = "Coordination.ApplyCommit"
APPLY_COMMITS = "Coordination.ApplyCommits"
APPLY_ABORT = "Coordination.ApplyAbort"
COUNT_ENTRIES = "Coordination.CountEntries"
SETTLE = "Coordination.SettleOffsetsHolder"
LOOKUP = "Coordination.LookupProducer"
FORGERIES = (FETCH, APPLY_COMMIT, APPLY_COMMITS, APPLY_ABORT, COUNT_ENTRIES, SETTLE, LOOKUP)
HANDSHAKE_FAILED = {grpc.StatusCode.UNAVAILABLE}
REFUSED_BY_NAME = {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED}
EXPECTED: dict[tuple[str, str], set[grpc.StatusCode]] = {
    (CLIENT_PORT, PLAIN): {grpc.StatusCode.UNIMPLEMENTED},
    (CLIENT_PORT, CLIENT_TOKEN): {grpc.StatusCode.UNIMPLEMENTED},
    (INTER_BROKER_PORT, PLAIN): HANDSHAKE_FAILED,
    (INTER_BROKER_PORT, CLIENT_TOKEN): HANDSHAKE_FAILED,
    (INTER_BROKER_PORT, FOREIGN_CA): HANDSHAKE_FAILED,
    (INTER_BROKER_PORT, CLUSTER_ALICE): REFUSED_BY_NAME,
}
# Codes a down, paused or restarting broker gives: never a refusal, never a breach.
UNANSWERED = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


@dataclass
class ForgeryTally:
    """What the forged calls got. Thread rule: written by the attacker's thread only, read
    once it stopped (or between rounds, on the same thread)."""

    refused: Counter[str] = field(default_factory=Counter)  # "door caller: CODE"
    accepted: list[str] = field(default_factory=list)  # the anomaly: an answer
    unexpected: list[str] = field(default_factory=list)  # strict rounds: another code
    unanswered: Counter[str] = field(default_factory=Counter)  # a broker down or paused
    calls: int = 0

    def render(self) -> str:
        refused = sum(self.refused.values())
        return (
            f"{self.calls} forged internal calls: refused {refused}, accepted "
            f"{len(self.accepted)}, unexpected codes {len(self.unexpected)}, unanswered "
            f"{sum(self.unanswered.values())}; refusals by door, caller and code: "
            f"{dict(sorted(self.refused.items()))}"
        )


@dataclass(frozen=True)
class Credentials:
    """A TLS caller's files."""

    certificate: bytes
    key: bytes
    ca: bytes  # the cluster CA: the attacker trusts the brokers' certificates


def make_attacker_credentials(cluster: FaultCluster, directory: Path) -> dict[str, Credentials]:
    """FOREIGN_CA: another CA's certificate for broker 2's very name; CLUSTER_ALICE: the
    cluster CA's signature on CN=alice (a CA that also signs clients, say)."""
    assert cluster.security is not None, "the attacker needs a secured cluster"
    cluster_ca = cluster.security.ca_file
    foreign = make_broker_certificates(directory / "foreign", [2])[2]
    alice = directory / "alice"
    alice.mkdir(parents=True, exist_ok=True)
    openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-subj", "/CN=alice", "-keyout", "alice.key", "-out", "alice.csr", cwd=alice,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", "alice.csr", "-CA", str(cluster_ca),
        "-CAkey", str(cluster_ca.with_name("ca.key")), "-CAcreateserial",
        "-CAserial", str(alice / "ca.srl"), "-days", "1", "-out", "alice.pem", cwd=alice,
    )  # fmt: skip
    ca = cluster_ca.read_bytes()
    return {
        FOREIGN_CA: Credentials(foreign.certificate.read_bytes(), foreign.key.read_bytes(), ca),
        CLUSTER_ALICE: Credentials(
            (alice / "alice.pem").read_bytes(), (alice / "alice.key").read_bytes(), ca
        ),
    }


class InternalAttacker:
    """Thread rule: one thread."""

    def __init__(
        self,
        cluster: FaultCluster,
        directory: Path,
        topic: str,
        partitions: int,
        credentials: dict[str, Credentials] | None = None,
    ) -> None:
        """``credentials``: another attacker's (None: made in ``directory``)."""
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.credentials = credentials or make_attacker_credentials(cluster, directory)
        self.token = cluster.token(ATTACKER)
        self.tally = ForgeryTally()
        self.producer: tuple[int, int] = (0, 0)  # an honest producer's id and generation

    def aim_at_producer(self, producer_id: int, generation: int) -> None:
        self.producer = (producer_id, generation)

    # --- one round -------------------------------------------------------------------

    def round(self, rng: random.Random, strict: bool = False, sample: int | None = None) -> None:
        """Every forgery, by every caller, at every door of every broker, in a random
        order (``sample``: only that many of them). ``strict``: every broker runs now, so a
        code outside EXPECTED is recorded as ``unexpected``."""
        calls = [
            (broker_id, door, caller, forgery)
            for broker_id in self.cluster.brokers
            for door in (CLIENT_PORT, INTER_BROKER_PORT)
            for caller in CALLERS
            if (door, caller) in EXPECTED
            for forgery in FORGERIES
        ]
        rng.shuffle(calls)
        for broker_id, door, caller, forgery in calls[:sample]:
            self.attempt(broker_id, door, caller, forgery, rng, strict)

    def attempt(
        self,
        broker_id: int,
        door: str,
        caller: str,
        forgery: str,
        rng: random.Random,
        strict: bool,
    ) -> None:
        broker = self.cluster.brokers[broker_id]
        if door == CLIENT_PORT:
            address = broker.address
        else:
            assert broker.inter_broker_port is not None, "the cluster has no inter-broker port"
            address = f"127.0.0.1:{broker.inter_broker_port}"
        what = f"{forgery} by {caller} to broker {broker_id}'s {door}"
        self.tally.calls += 1
        channel = self._channel(address, caller, broker_id)
        try:
            call, request = self._forgery(channel, forgery, rng)
            metadata = (
                [(AUTHORIZATION_KEY, f"Bearer {self.token}")] if caller == CLIENT_TOKEN else []
            )
            answer = call(request, timeout=CALL_TIMEOUT_S, metadata=metadata)
        except grpc.RpcError as error:
            code = error.code()
            if code in EXPECTED[(door, caller)]:
                self.tally.refused[f"{door} {caller}: {code.name}"] += 1
            elif code in UNANSWERED and not strict:
                self.tally.unanswered[f"{door} {caller}: {code.name}"] += 1
            else:
                details = (error.details() or "")[:200]
                self.tally.unexpected.append(f"{what}: {code.name} {details}")
        else:
            self.tally.accepted.append(f"{what}: answered {str(answer)[:200]!r}")
        finally:
            channel.close()

    # --- channels and requests -------------------------------------------------------

    def _channel(self, address: str, caller: str, broker_id: int) -> grpc.Channel:
        if caller not in TLS_CALLERS:
            return grpc.insecure_channel(address)
        files = self.credentials[caller]
        credentials = grpc.ssl_channel_credentials(files.ca, files.key, files.certificate)
        # The broker's certificate names it, not 127.0.0.1: checked as a broker checks it.
        options = [("grpc.ssl_target_name_override", broker_name(broker_id))]
        return grpc.secure_channel(address, credentials, options=options)

    def _forgery(
        self, channel: grpc.Channel, forgery: str, rng: random.Random
    ) -> tuple[Callable[..., Any], Any]:
        partition = rng.randrange(self.partitions)
        topic_partition = TopicPartition(self.topic, partition)
        state = self.cluster.state(self.topic, partition)
        leader_epoch = 0 if state is None else state.leader_epoch
        epochs = CallEpochs(0, HUGE_EPOCH, leader_epoch)
        transaction_id = rng.randrange(1, 1 << 40)
        coordination = coordination_pb2_grpc.CoordinationStub(channel)
        if forgery == FETCH:
            follower = 1
            if state is not None:
                follower = next((b for b in state.replicas if b != state.leader), follower)
            fetch = ReplicaFetch(
                replica_id=follower,
                broker_epoch=HUGE_EPOCH,
                partitions=(
                    ReplicaFetchPartition(topic_partition, HUGE_OFFSET, leader_epoch, leader_epoch),
                ),
                max_wait_ms=0,
            )
            return replication_pb2_grpc.ReplicationStub(channel).Fetch, fetch_to_proto(fetch)
        if forgery == APPLY_COMMIT:
            commit = ApplyCommit(transaction_id, topic_partition, None, 1, epochs)
            return coordination.ApplyCommit, coordination_convert.commit_to_proto(commit)
        if forgery == APPLY_COMMITS:
            group = [
                ApplyCommit(transaction_id, topic_partition, None, 1, epochs),
                ApplyCommit(transaction_id + 256, topic_partition, None, 1, epochs),
            ]
            return coordination.ApplyCommits, coordination_convert.commits_to_proto(group)
        if forgery == APPLY_ABORT:
            abort = ApplyAbort(transaction_id, topic_partition, epochs)
            return coordination.ApplyAbort, coordination_convert.abort_to_proto(abort)
        if forgery == COUNT_ENTRIES:
            count = CountEntries(transaction_id, topic_partition, epochs)
            return coordination.CountEntries, coordination_convert.count_to_proto(count)
        if forgery == SETTLE:
            settle = SettleOffsetsHolder(
                transaction_id, transaction_id + 1, f"{self.topic}-group", topic_partition, True
            )
            return coordination.SettleOffsetsHolder, coordination_convert.settle_to_proto(settle)
        if forgery == LOOKUP:
            producer_id, generation = self.producer
            lookup = LookupProducer(producer_id, generation)
            return coordination.LookupProducer, coordination_convert.lookup_to_proto(lookup)
        raise AssertionError(forgery)


def journal_leader_epoch(cluster: FaultCluster) -> int:
    state = cluster.state(TXN_JOURNAL_TOPIC, 0)
    return -1 if state is None else state.leader_epoch


class BackgroundAttacker:
    """``attacker.round(sample=...)`` every ``pause_s`` on a thread of its own, across the
    faults, until the ``with`` ends (not strict: brokers die and pause meanwhile)."""

    def __init__(
        self, attacker: InternalAttacker, seed: int, sample: int = 8, pause_s: float = 1.0
    ) -> None:
        self.attacker = attacker
        self.rng = random.Random(seed)
        self.sample = sample
        self.pause_s = pause_s
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="forger", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.pause_s):
                self.attacker.round(self.rng, sample=self.sample)
        except BaseException as error:  # reported by __exit__, on the test's thread
            self._failure = error

    def __enter__(self) -> BackgroundAttacker:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the background attacker did not stop"
        if self._failure is not None and kind is None:
            raise AssertionError(f"the background attacker failed: {self._failure!r}")
