"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, as Kafka has it
(KIP-84): what a credential keeps, and one login's exchange of four messages.

    client-first  n,,n=USER,r=CNONCE                     gs2 header, user (=2C =3D escaped)
    server-first  r=CNONCE+SNONCE,s=BASE64(SALT),i=ITERATIONS
    client-final  c=biws,r=CNONCE+SNONCE,p=BASE64(PROOF)   c: the gs2 header, base64
    server-final  v=BASE64(SERVER SIGNATURE)

A credential (``ScramCredential``) is the salt, the iteration count, StoredKey and
ServerKey: never the password, nor SaltedPassword (from which the client key follows).
StoredKey lets the server check a proof, ServerKey lets it prove itself; neither lets
anyone log in without a dictionary attack on the password.

A refused login says only "authentication failed" and why in words that hold for a known
and an unknown user alike: an unknown user gets a server-first message as a known one
does (a salt derived from the user name and a secret of this process, the default count)
and is refused at the proof, so nothing tells whether the user exists. Proofs are
compared with ``hmac.compare_digest``. Channel binding (``p=``) and Kafka's extensions
(``tokenauth``: delegation tokens) are not supported.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MECHANISMS = tuple(HASHES)
# Kafka's bounds (ScramMechanism.minIterations, and its 16384 ceiling for AlterUserScramCredentials).
ITERATIONS_MIN = 4096
ITERATIONS_MAX = 16384
ITERATIONS_DEFAULT = 8192
SALT_BYTES = 32
SALT_BYTES_MIN = 8  # a salt shorter than this is an unacceptable credential
NONCE_BYTES = 24
GS2_NO_CHANNEL_BINDING = "n"  # the client supports none
GS2_NOT_USED_BY_SERVER = "y"  # the client could bind, thinks the server cannot


class ScramError(Exception):
    """A SCRAM message is wrong or the proof does not match: the message says which, never a
    secret, and is the same for an unknown user and a wrong password."""


def hash_name(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ValueError(
            f"{mechanism!r} is not a SCRAM mechanism; use one of {', '.join(MECHANISMS)}"
        ) from None


def _hmac(name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i): PBKDF2 with HMAC of the mechanism's hash (the
    password as UTF-8, without SASLprep, as Kafka's Java clients send it)."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode(), salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return _hmac(hash_name(mechanism), salted, b"Client Key")


def stored_key(mechanism: str, key: bytes) -> bytes:
    return hashlib.new(hash_name(mechanism), key).digest()


def server_key(mechanism: str, salted: bytes) -> bytes:
    return _hmac(hash_name(mechanism), salted, b"Server Key")


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of one user's password for one mechanism."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, iterations: int, salted: bytes
    ) -> ScramCredential:
        """From SaltedPassword (what AlterUserScramCredentials and ``twinlog users`` send)."""
        check_credential(mechanism, salt, iterations)
        expected = hashlib.new(hash_name(mechanism)).digest_size
        if len(salted) != expected:
            raise ValueError(
                f"a {mechanism} salted password is {expected} bytes, not {len(salted)}"
            )
        return cls(
            mechanism,
            salt,
            iterations,
            stored_key(mechanism, client_key(mechanism, salted)),
            server_key(mechanism, salted),
        )

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        iterations: int = ITERATIONS_DEFAULT,
        salt: bytes | None = None,
    ) -> ScramCredential:
        salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
        check_credential(mechanism, salt, iterations)
        salted = salted_password(mechanism, password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, iterations, salted)


def check_credential(mechanism: str, salt: bytes, iterations: int) -> None:
    """ValueError (saying what to change) unless Kafka would accept this credential."""
    hash_name(mechanism)
    if not ITERATIONS_MIN <= iterations <= ITERATIONS_MAX:
        raise ValueError(
            f"{iterations} iterations is outside {ITERATIONS_MIN}..{ITERATIONS_MAX}; "
            f"pick a count in that range (default {ITERATIONS_DEFAULT})"
        )
    if len(salt) < SALT_BYTES_MIN:
        raise ValueError(
            f"a salt of {len(salt)} bytes is too short; give at least {SALT_BYTES_MIN} "
            "random bytes (or none: one is generated)"
        )


def escape_user(user: str) -> str:
    """RFC 5802's saslname: ``=`` as ``=3D``, ``,`` as ``=2C``."""
    return user.replace("=", "=3D").replace(",", "=2C")


def unescape_user(name: str) -> str:
    out = []
    index = 0
    while index < len(name):
        character = name[index]
        if character == ",":
            raise ScramError("a user name holds a bare ',' (it is sent as '=2C')")
        if character == "=":
            code = name[index : index + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise ScramError("a user name holds '=' not followed by 2C or 3D")
            index += 3
            continue
        out.append(character)
        index += 1
    return "".join(out)


def _attributes(message: str, names: str, what: str) -> list[str]:
    """The values of ``message``'s leading attributes, which must be ``names`` in order
    (any extension after them is refused)."""
    parts = message.split(",")
    if len(parts) < len(names):
        raise ScramError(f"the {what} message has {len(parts)} attributes, expected {len(names)}")
    values = []
    for name, part in zip(names, parts, strict=False):
        if not part.startswith(f"{name}="):
            raise ScramError(f"the {what} message lacks its '{name}=' attribute where due")
        values.append(part[2:])
    if len(parts) > len(names):
        raise ScramError(
            f"the {what} message carries extensions ({parts[len(names)][:1]}=...), "
            "which this server does not support (no tokenauth)"
        )
    return values


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ScramError(f"the {what} is not base64") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass
class ClientFirst:
    gs2_header: str  # "n,," or "n,a=AUTHZID," (with its trailing comma)
    user: str
    nonce: str
    bare: str  # n=USER,r=NONCE, as sent (part of the AuthMessage)


def parse_client_first(message: bytes) -> ClientFirst:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("the client-first message is not UTF-8") from None
    parts = text.split(",", 2)
    if len(parts) != 3:
        raise ScramError("the client-first message is not 'n,,n=USER,r=NONCE'")
    flag, authzid, bare = parts
    if flag.startswith("p="):
        raise ScramError("channel binding (p=) is not supported; use 'n' in the gs2 header")
    if flag not in (GS2_NO_CHANNEL_BINDING, GS2_NOT_USED_BY_SERVER):
        raise ScramError("the client-first message's gs2 header must start 'n,' or 'y,'")
    if bare.startswith("m="):
        raise ScramError("mandatory extensions (m=) are not supported")
    user_field, nonce = _attributes(bare, "nr", "client-first")
    user = unescape_user(user_field)
    if not user:
        raise ScramError("the client-first message names no user")
    if authzid:
        if not authzid.startswith("a=") or unescape_user(authzid[2:]) != user:
            raise ScramError(f"user {user!r} may act only as itself (authzid)")
    if not nonce or not nonce.isprintable():
        raise ScramError("the client nonce is empty or not printable")
    return ClientFirst(f"{flag},{authzid},", user, nonce, bare)


class ServerExchange:
    """One SCRAM login on the server: ``first`` answers the client-first message,
    ``final`` checks the client-final one and answers the server-final message. Either
    raises ScramError (the login fails). ``credential_of`` finds a user's credential for
    this mechanism (None: no such user, or none for this mechanism)."""

    _unknown_user_secret = secrets.token_bytes(32)  # per process: fake salts for unknown users

    def __init__(
        self,
        mechanism: str,
        credential_of: Callable[[str], ScramCredential | None],
        server_nonce: str | None = None,
    ) -> None:
        hash_name(mechanism)
        self.mechanism = mechanism
        self._credential_of = credential_of
        self._server_nonce = server_nonce
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first: ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._finished = False

    def first(self, message: bytes) -> bytes:
        if self._client_first is not None:
            raise ScramError("a second client-first message")
        client_first = parse_client_first(message)
        self._client_first = client_first
        self.user = client_first.user
        credential = self._credential_of(client_first.user)
        self._credential = credential
        if credential is None:  # answer as for a known user; refused at the proof
            salt = _hmac("sha256", self._unknown_user_secret, client_first.user.encode())
            iterations = ITERATIONS_MIN
        else:
            salt, iterations = credential.salt, credential.iterations
        server_nonce = self._server_nonce or secrets.token_urlsafe(NONCE_BYTES)
        self._nonce = client_first.nonce + server_nonce
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        client_first = self._client_first
        if client_first is None or not self._server_first:
            raise ScramError("a client-final message before the client-first one")
        if self._finished:
            raise ScramError("a second client-final message (one try per login)")
        self._finished = True
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("the client-final message is not UTF-8") from None
        without_proof, separator, proof_text = text.rpartition(",p=")
        if not separator:
            raise ScramError("the client-final message carries no proof (p=)")
        binding, nonce = _attributes(without_proof, "cr", "client-final")
        if _b64decode(binding, "channel binding (c=)") != client_first.gs2_header.encode():
            raise ScramError("the channel binding (c=) is not the client-first's gs2 header")
        # Kafka takes a nonce that ends with the one it sent (librdkafka 2.0 puts its own
        # nonce before it once more); the proof covers the message as sent either way.
        echoed = nonce[len(nonce) - len(self._nonce) :] if len(nonce) >= len(self._nonce) else ""
        if not hmac.compare_digest(echoed.encode(), self._nonce.encode()):
            raise ScramError("the nonce (r=) does not end with the one the server sent")
        proof = _b64decode(proof_text, "proof (p=)")
        auth_message = ",".join((client_first.bare, self._server_first, without_proof)).encode()
        name = hash_name(self.mechanism)
        credential = self._credential
        # An unknown user's proof is checked against a random key: the same work, refused.
        known = credential.stored_key if credential is not None else secrets.token_bytes(32)
        signature = _hmac(name, known, auth_message)
        if len(proof) != len(signature):
            raise ScramError(f"the proof is not {len(signature)} bytes")
        key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        matches = hmac.compare_digest(hashlib.new(name, key).digest(), known)
        if credential is None or not matches:
            raise ScramError("the user is unknown or the password is wrong")
        verifier = _hmac(name, credential.server_key, auth_message)
        return f"v={_b64(verifier)}".encode()
