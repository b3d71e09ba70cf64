"""The fault harness with authentication and ACLs on: principals, grants, and the attacker's attacks.

Three principals share one server (``--tokens-file``, ``--acl-file``; formats in
``twinlog.rpc.policy.auth``):

    operator   creates the topic, watches transactions, reads everything back at the end
    victim     every transactional worker and the plain producer; one transactional
               worker commits offsets of group ``victims`` in each of its transactions
    attacker   READ on the topics, WRITE on the topic the victims write, its own
               transactional id and groups; nothing of the victim's

The attacker tries, round after round across the kills, each attack of ``ATTACKS``
(the security bypasses of consumer groups and idempotent producer ids): every one
must be refused with AuthorizationError, and listing transactions must show none of
the victim's. An accepted attack is an ``isolation breach``.
"""

from __future__ import annotations

import random
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from twinlog.engine.base.errors import AuthorizationError, TwinlogError
from twinlog.engine.base.types import ProducerIdentity, TopicPartition
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client.remote import RemoteBroker

OPERATOR = "operator"
VICTIM = "victim"
ATTACKER = "attacker"
VICTIM_GROUP = "victims"
VICTIM_TRANSACTIONAL_IDS = "fault-harness-*"
ATTACKER_TRANSACTIONAL_ID = "attacker-0"
OFFSETS_TOPIC_PARTITIONS_TRIED = 4  # the attacker does not know how many there are
FETCH_BACK_RECORDS = 64  # how far behind the end the attacker looks for a victim's batch

SEND_OFFSETS = "send offsets for the victims' group"
COMMIT_OFFSETS = "commit the victims' group offsets"
FETCH_OFFSETS = "fetch the victims' group offsets"
LIST_GROUPS = "list the victims' transactions and groups"
READ_OFFSETS_TOPIC = f"read {OFFSETS_TOPIC}"
NEXT_SEQUENCE = "write a victim's next sequence"
NEXT_GENERATION = "fence a victim (generation + 1)"
ATTACKS = (
    SEND_OFFSETS,
    COMMIT_OFFSETS,
    FETCH_OFFSETS,
    LIST_GROUPS,
    READ_OFFSETS_TOPIC,
    NEXT_SEQUENCE,
    NEXT_GENERATION,
)


def acl_text(topic: str) -> str:
    """The grants: the victim and the attacker share ``topic``, and nothing else."""
    return f"""\
{OPERATOR}  all       *
{OPERATOR}  all       transactional-id:*
{OPERATOR}  all       group:*
{OPERATOR}  read      __*
{VICTIM}    read      {topic}
{VICTIM}    write     {topic}
{VICTIM}    write     transactional-id:{VICTIM_TRANSACTIONAL_IDS}
{VICTIM}    read      group:{VICTIM_GROUP}
{ATTACKER}  read      *
{ATTACKER}  write     {topic}
{ATTACKER}  write     transactional-id:{ATTACKER_TRANSACTIONAL_ID}
{ATTACKER}  read      group:{ATTACKER}-*
"""


@dataclass(frozen=True)
class Security:
    """The principals' tokens and the server's arguments that turn authentication and ACLs on."""

    tokens: dict[str, str]
    server_arguments: tuple[str, ...]

    @classmethod
    def write(cls, directory: Path, topic: str, acl: bool = True) -> Security:
        """Tokens (and, with ``acl``, the ACL file) in ``directory``. Without ``acl`` every
        authenticated principal may do everything: the attacks then succeed (a check of the
        checker, never a CI mode)."""
        directory.mkdir(parents=True, exist_ok=True)
        tokens = {name: secrets.token_hex(16) for name in (OPERATOR, VICTIM, ATTACKER)}
        tokens_path = directory / "tokens.txt"
        tokens_path.write_text("".join(f"{token} {name}\n" for name, token in tokens.items()))
        arguments = ["--tokens-file", str(tokens_path)]
        if acl:
            acl_path = directory / "acl.txt"
            acl_path.write_text(acl_text(topic))
            arguments += ["--acl-file", str(acl_path)]
        return cls(tokens, tuple(arguments))


@dataclass
class AttackTally:
    """What the attacker's attempts got: per attack, refusals and (the anomaly) acceptances.

    Thread rule: written by the attacker's thread only; read after it has stopped.
    """

    refused: Counter[str] = field(default_factory=Counter)
    accepted: list[str] = field(default_factory=list)  # "attack: what it got"
    unanswered: Counter[str] = field(default_factory=Counter)  # "attack: error class"
    skipped: Counter[str] = field(default_factory=Counter)  # nothing to aim at yet

    def tried(self, attack: str) -> int:
        return self.refused[attack] + sum(
            1 for found in self.accepted if found.startswith(attack + ":")
        )

    def summary(self, attack: str) -> str:
        accepted = self.tried(attack) - self.refused[attack]
        return f"tried {self.tried(attack)}, refused {self.refused[attack]}, accepted {accepted}"


class Attacker:
    """One round of every attack (in a random order) through ``remote``, as principal
    ``attacker``. Thread rule: one thread."""

    def __init__(self, topic: str, partitions: int, transaction_timeout_ms: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.transaction_timeout_ms = transaction_timeout_ms
        self.tally = AttackTally()
        self._identity: ProducerIdentity | None = None
        self._values = 0

    def round(self, remote: RemoteBroker, rng: random.Random) -> None:
        attacks: list[tuple[str, Callable[[], str | None]]] = [
            (SEND_OFFSETS, lambda: self.send_offsets(remote)),
            (COMMIT_OFFSETS, lambda: self.commit_offsets(remote)),
            (FETCH_OFFSETS, lambda: self.fetch_offsets(remote)),
            (LIST_GROUPS, lambda: self.list_groups(remote)),
            (READ_OFFSETS_TOPIC, lambda: self.read_offsets_topic(remote, rng)),
            (NEXT_SEQUENCE, lambda: self.as_victim(remote, rng, next_generation=False)),
            (NEXT_GENERATION, lambda: self.as_victim(remote, rng, next_generation=True)),
        ]
        rng.shuffle(attacks)
        for name, attack in attacks:
            self.attempt(name, attack)

    def attempt(self, name: str, attack: Callable[[], str | None]) -> None:
        """Run one attack: a returned text is what it got through (a breach), None a
        refusal (AuthorizationError, or a listing that showed nothing of the victim's)."""
        try:
            got = attack()
        except AuthorizationError:
            self.tally.refused[name] += 1
        except NothingToAim:
            self.tally.skipped[name] += 1
        except TwinlogError as error:  # the server is down, restarting, ...
            self.tally.unanswered[f"{name}: {type(error).__name__}"] += 1
        else:
            if got is None:
                self.tally.refused[name] += 1
            else:
                self.tally.accepted.append(f"{name}: {got}")

    # --- the attacks: each returns what it got (a breach), or raises ----------------

    def send_offsets(self, remote: RemoteBroker) -> str:
        """KIP-447 fencing would abort the victims' open transaction holding the group's
        offsets (older than ours), or fence their next one (ours holds them first)."""
        if self._identity is None:
            self._identity = remote.init_producer(
                ATTACKER_TRANSACTIONAL_ID, self.transaction_timeout_ms
            )
        identity = self._identity
        try:
            transaction_id = remote.begin_transaction(
                identity.producer_id, identity.producer_generation
            )
        except TwinlogError:
            self._identity = None  # fenced by a restart's timeout, ...: init again next time
            raise
        try:
            remote.send_offsets_to_transaction(
                transaction_id,
                identity.producer_id,
                identity.producer_generation,
                VICTIM_GROUP,
                {TopicPartition(self.topic, 0): 0},
            )
            return f"transaction {transaction_id} took group {VICTIM_GROUP!r}'s offsets"
        finally:
            try:
                remote.abort_transaction(
                    transaction_id, identity.producer_id, identity.producer_generation
                )
            except TwinlogError:
                self._identity = None

    def commit_offsets(self, remote: RemoteBroker) -> str:
        remote.commit_offsets(VICTIM_GROUP, {TopicPartition(self.topic, 0): 0})
        return f"overwrote group {VICTIM_GROUP!r}'s offset with 0"

    def fetch_offsets(self, remote: RemoteBroker) -> str:
        found = remote.fetch_offsets(VICTIM_GROUP, [TopicPartition(self.topic, 0)])
        return f"read group {VICTIM_GROUP!r}'s offsets {found}"

    def list_groups(self, remote: RemoteBroker) -> str | None:
        shown = [
            f"{item.transactional_id} (groups {list(item.groups)})"
            for item in remote.list_transactions()
            if item.transactional_id != ATTACKER_TRANSACTIONAL_ID or VICTIM_GROUP in item.groups
        ]
        return f"listed {', '.join(shown)}" if shown else None

    def read_offsets_topic(self, remote: RemoteBroker, rng: random.Random) -> str:
        partition = rng.randrange(OFFSETS_TOPIC_PARTITIONS_TRIED)
        fetched = remote.fetch(OFFSETS_TOPIC, partition, 0)
        return f"fetched {len(fetched.records)} bytes of {OFFSETS_TOPIC}-{partition}"

    def as_victim(self, remote: RemoteBroker, rng: random.Random, next_generation: bool) -> str:
        """A batch under the victim's idempotent producer id, read off her batch header:
        at her next sequence (her next record would be acknowledged as a duplicate and
        never stored), or at generation + 1 (she would be fenced)."""
        partition = rng.randrange(self.partitions)
        header = self.victims_last_batch(remote, partition)
        self._values += 1
        builder = RecordBatchBuilder(
            "none",
            producer_id=header.producer_id,
            producer_generation=header.producer_generation + (1 if next_generation else 0),
            base_sequence=0 if next_generation else header.base_sequence + header.record_count,
        )
        # Recognisable if it ever lands: the checker also reports it as a foreign value.
        builder.append(f"A|attacker|n{self._values}|{partition}|".encode())
        result = remote.produce(self.topic, partition, builder.build())
        return (
            f"produced as producer {header.producer_id} (generation "
            f"{builder.producer_generation}, sequence {builder.base_sequence}) to partition "
            f"{partition}: {result}"
        )

    def victims_last_batch(self, remote: RemoteBroker, partition: int) -> BatchHeader:
        """The header of the last idempotent (non-transactional) batch near the end of
        ``partition``: what any reader of the topic sees."""
        end = remote.list_offset(self.topic, partition, "latest")
        start = max(0, end - FETCH_BACK_RECORDS)
        found: BatchHeader | None = None
        offset = start
        while offset < end:
            fetched = remote.fetch(self.topic, partition, offset, max_bytes=4 << 20)
            batches = list(iter_batches(fetched.records))
            if not batches:
                break
            before = offset
            for batch in batches:
                header = batch.header
                if header.producer_id >= 0 and not header.is_transactional:
                    found = header
                offset = header.next_offset
            if offset <= before:
                break
        if found is None:
            raise NothingToAim(f"no idempotent batch in {self.topic}-{partition} [{start}, {end})")
        return found


class NothingToAim(Exception):
    """No victim batch to read a producer id from yet: this attack waits for the next round."""
