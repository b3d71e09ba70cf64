"""A secured test cluster's credentials: tokens, an ACL file, broker certificates and the
ZooKeeper credential, written once into a folder (no tests here).

    security = ClusterSecurity.write(root / "security", broker_ids=[1, 2, 3])
    security.broker_arguments(1)   # the ``twinlog serve`` flags of broker 1
    security.token()               # the operator's token: every client the support hands out
    security.credential            # for the test's own ZooKeeper session

Principals (``PRINCIPALS``) and their grants (``ACL``, formats in ``rpc/policy/auth.py``):

    operator    everything: every topic, the internal ones, every transactional id, group
                and broker (creates topics, reads logs back for the checks, admin tools,
                stops a decommissioned broker)
    producer    write on every topic: an idempotent producer (its producer id is its own)
    txn-writer  write on every topic and on transactional ids ``*-writer``
    reader      read on every topic (no group, no internal topic)
    member      read on every topic and on groups ``*-readers``/``*-group``: a group member
    attacker    read on every topic, its own transactional ids and groups, nothing else:
                the nemesis's forged internal calls carry its token

Broker certificates (``rpc/cli/cluster_certs.py``: CN=twinlog-broker-N from a throwaway
cluster CA) give the brokers mutual TLS on their inter-broker listeners; the ZooKeeper
credential (``engine/zookeeper/credentials.py``) locks every znode to the brokers and to
whoever has it (the test's own session).

Thread rule: immutable once written; any thread.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from twinlog.engine.zookeeper.credentials import (
    ZooKeeperCredential,
    ensure_zookeeper_credential_file,
)
from twinlog.rpc.cli.cluster_certs import BrokerCertFiles, make_broker_certificates

OPERATOR = "operator"
PRODUCER = "producer"
TXN_WRITER = "txn-writer"
READER = "reader"
MEMBER = "member"
ATTACKER = "attacker"
PRINCIPALS = (OPERATOR, PRODUCER, TXN_WRITER, READER, MEMBER, ATTACKER)
TXN_WRITER_IDS = "*-writer"
ATTACKER_IDS = "attacker-*"
ACL = f"""\
# principal  operation  pattern
{OPERATOR}   all        *
{OPERATOR}   all        __*
{OPERATOR}   all        transactional-id:*
{OPERATOR}   all        group:*
{OPERATOR}   all        broker:*
{PRODUCER}   write      *
{TXN_WRITER} write      *
{TXN_WRITER} write      transactional-id:{TXN_WRITER_IDS}
{READER}     read       *
{MEMBER}     read       *
{MEMBER}     read       group:*-readers
{MEMBER}     read       group:*-group
{ATTACKER}   read       *
{ATTACKER}   write      transactional-id:{ATTACKER_IDS}
{ATTACKER}   read       group:{ATTACKER}-*
"""


@dataclass(frozen=True)
class ClusterSecurity:
    directory: Path
    tokens: dict[str, str]  # principal -> token
    tokens_file: Path
    acl_file: Path
    certificates: dict[int, BrokerCertFiles]
    zookeeper_auth_file: Path
    credential: ZooKeeperCredential

    @classmethod
    def write(cls, directory: Path, broker_ids: Iterable[int], acl: str = ACL) -> ClusterSecurity:
        """Fresh tokens for ``PRINCIPALS``, the ACL file ``acl``, a CA and a certificate
        per broker, and a ZooKeeper credential, all in ``directory`` (made)."""
        directory.mkdir(parents=True, exist_ok=True)
        tokens = {name: secrets.token_hex(16) for name in PRINCIPALS}
        tokens_file = directory / "tokens.txt"
        tokens_file.write_text("".join(f"{token} {name}\n" for name, token in tokens.items()))
        acl_file = directory / "acl.txt"
        acl_file.write_text(acl)
        certificates = make_broker_certificates(directory / "certs", sorted(broker_ids))
        zookeeper_auth_file = directory / "zookeeper.auth"
        credential = ensure_zookeeper_credential_file(zookeeper_auth_file)
        return cls(
            directory,
            tokens,
            tokens_file,
            acl_file,
            certificates,
            zookeeper_auth_file,
            credential,
        )

    def token(self, principal: str = OPERATOR) -> str:
        return self.tokens[principal]

    @property
    def ca_file(self) -> Path:
        return self.directory / "certs" / "ca.pem"

    def broker_arguments(self, broker_id: int) -> list[str]:
        """Tokens, ACLs, broker ``broker_id``'s certificates and the ZooKeeper credential."""
        return [
            "--tokens-file",
            str(self.tokens_file),
            "--acl-file",
            str(self.acl_file),
            *self.certificates[broker_id].serve_arguments(),
            "--zookeeper-auth-file",
            str(self.zookeeper_auth_file),
        ]
