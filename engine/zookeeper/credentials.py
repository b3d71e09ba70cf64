"""The ZooKeeper credential of a cluster: ``ZooKeeperCredential``, from a credentials file.

    # DIR/zookeeper.auth (mode 600): one line, the scheme then USER:PASSWORD
    digest twinlog:6f3d1c0e9a8b47d2b1f0

    credential = load_zookeeper_credential("DIR/zookeeper.auth")
    ZooKeeperSession(connect, credential=credential)

ZooKeeper's digest scheme: the session authenticates as ``USER:PASSWORD`` (kazoo's
``auth_data``), and every znode the cluster creates gets one ACL entry, ALL for the
identity ``digest:USER:base64(sha1(USER:PASSWORD))`` and nothing for anyone else, so an
unauthenticated client, or one with another password, can neither read nor write it.
The server needs no configuration for it (digest is built in); the password crosses
the wire in clear, so a link that can be sniffed needs TLS or SASL (docs/zookeeper.md).

The password is never logged, never in an error and never in ``repr``: errors about a
file name its path and line number, not the line.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.security import ACL, Permissions, make_digest_acl, make_digest_acl_credential

from twinlog.engine.base.config_rules import ConfigRules, Text
from twinlog.engine.base.errors import InvalidConfigError

log = logging.getLogger(__name__)

DIGEST_SCHEME = "digest"
PASSWORD_LENGTH_MIN = 12  # a digest hash is a plain SHA-1: short passwords fall to guessing
FILE_FORMAT = "one line 'digest USER:PASSWORD' (lines starting with # are comments)"


@dataclass(frozen=True)
class ZooKeeperCredential:
    """A digest user and its password. Its errors quote neither: a line mistyped in the
    file may have put part of the password into the user. Invariant (checked at construction): ``user`` is
    printable ASCII without ``:`` or whitespace, ``password`` printable ASCII without
    whitespace and at least ``PASSWORD_LENGTH_MIN`` long. ASCII only because ZooKeeper
    hashes with its JVM's default charset and kazoo with UTF-8 (kazoo's own warning)."""

    user: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        RULES.check(self)

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's ``auth_data``: sent at every (re)connect of the session."""
        return [(DIGEST_SCHEME, f"{self.user}:{self.password}")]

    @property
    def digest_id(self) -> str:
        """``USER:base64(sha1(USER:PASSWORD))``: the id ZooKeeper gives this session, as it
        appears in an ACL (a hash, but a guessable one: keep ACL dumps private too)."""
        return str(make_digest_acl_credential(self.user, self.password))

    @property
    def acl(self) -> list[ACL]:
        """Every permission for this identity, nothing for anyone else."""
        return [make_digest_acl(self.user, self.password, all=True)]

    def grants(self, entry: ACL) -> int:
        """The permissions ``entry`` gives this identity (0 if it names another)."""
        if entry.id.scheme == DIGEST_SCHEME and entry.id.id == self.digest_id:
            return int(entry.perms)
        return 0

    def __str__(self) -> str:
        return f"{DIGEST_SCHEME} user {self.user!r}"


# Both secret: a refusal gives their lengths, never their text.
RULES = ConfigRules(
    "ZooKeeper credential",
    {
        "user": Text(
            lambda user: bool(user) and _plain_ascii(user) and ":" not in user,
            "printable ASCII without ':' or spaces",
            secret=True,
        ),
        "password": Text(
            lambda password: _plain_ascii(password) and len(password) >= PASSWORD_LENGTH_MIN,
            f"at least {PASSWORD_LENGTH_MIN} characters of printable ASCII without spaces "
            "(e.g. python -c 'import secrets; print(secrets.token_hex(16))')",
            secret=True,
        ),
    },
)


def load_zookeeper_credential(path: str | os.PathLike[str]) -> ZooKeeperCredential:
    """The credential in the file at ``path`` (``FILE_FORMAT``).

    InvalidConfigError, naming the path and line, if the file is missing or unreadable,
    holds no credential or more than one, names another scheme, or the password is too
    short. A file others may read is accepted with a warning (as ssh would not)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="ascii")
        mode = file.stat().st_mode
    except FileNotFoundError:
        raise InvalidConfigError(
            f"ZooKeeper credentials file {file} does not exist; write {FILE_FORMAT} into it"
        ) from None
    except UnicodeDecodeError:
        raise InvalidConfigError(
            f"ZooKeeper credentials file {file}: not ASCII text; expected {FILE_FORMAT}"
        ) from None
    except OSError as error:
        raise InvalidConfigError(
            f"ZooKeeper credentials file {file} cannot be read ({error.strerror})"
        ) from None
    found: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            found.append((number, stripped))
    if len(found) != 1:
        raise InvalidConfigError(
            f"ZooKeeper credentials file {file}: {len(found)} credential lines, expected "
            f"{FILE_FORMAT}"
        )
    number, line = found[0]
    # The line holds the password: errors say what is wrong with it, never quote it.
    parts = line.split()
    if len(parts) != 2 or ":" not in parts[1]:
        raise InvalidConfigError(
            f"ZooKeeper credentials file {file}, line {number}: not in the form "
            f"'digest USER:PASSWORD' ({len(parts)} words)"
        )
    scheme, user_password = parts
    if scheme != DIGEST_SCHEME:
        shown = scheme if len(scheme) <= 16 else scheme[:16] + "..."
        raise InvalidConfigError(
            f"ZooKeeper credentials file {file}, line {number}: scheme {shown!r} is not "
            f"supported, only {DIGEST_SCHEME!r} (SASL is configured on the JVM side: "
            "docs/zookeeper.md)"
        )
    user, _, password = user_password.partition(":")
    try:
        credential = ZooKeeperCredential(user, password)
    except InvalidConfigError as error:
        raise InvalidConfigError(f"{file}, line {number}: {error}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "ZooKeeper credentials file %s can be read by other users (mode %o): chmod 600 it",
            file,
            stat.S_IMODE(mode),
        )
    log.info("ZooKeeper credential from %s: %s", file, credential)
    return credential


def ensure_zookeeper_credential_file(
    path: str | os.PathLike[str], user: str = "twinlog"
) -> ZooKeeperCredential:
    """The credential in ``path``, made first if there is no file: a random password for
    ``user``, written with mode 600 (for a development cluster, ``twinlog cluster up``).
    An existing file is loaded, never replaced: its cluster's znodes are locked with it."""
    file = Path(path)
    if not file.exists():
        credential = ZooKeeperCredential(user, secrets.token_hex(16))
        file.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL: of two makers, the second fails here and then loads the first's file.
        try:
            descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return load_zookeeper_credential(file)
        with os.fdopen(descriptor, "w", encoding="ascii") as out:
            out.write(
                "# ZooKeeper credential of a twinlog cluster (docs/zookeeper.md): every znode\n"
                "# the brokers create is readable and writable with it only.\n"
                f"{DIGEST_SCHEME} {credential.user}:{credential.password}\n"
            )
    return load_zookeeper_credential(file)


def _plain_ascii(text: str) -> bool:
    return all(33 <= ord(character) <= 126 for character in text)


def describe_acl(entries: list[ACL]) -> str:
    """An ACL as zkCli prints permissions (``cdrwa``), digest ids by user only (their
    hashes are guessable, so kept out of logs and errors)."""
    described = []
    for entry in entries:
        identity = entry.id.id
        if entry.id.scheme == DIGEST_SCHEME:
            identity = identity.partition(":")[0]
        letters = "".join(
            letter
            for letter, bit in (
                ("c", Permissions.CREATE),
                ("d", Permissions.DELETE),
                ("r", Permissions.READ),
                ("w", Permissions.WRITE),
                ("a", Permissions.ADMIN),
            )
            if entry.perms & bit
        )
        described.append(f"{entry.id.scheme}:{identity}:{letters or '-'}")
    return ", ".join(described) or "empty"
