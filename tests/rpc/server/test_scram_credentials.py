"""SCRAM's server side (``twinlog.rpc.policy.scram``) and its credential file
(``scram_store``): RFC 7677's test vector, user name escaping, refusals that do not tell
a wrong password from an unknown user, and a store that keeps nothing secret."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stat
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from twinlog.rpc.policy.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramError,
    ServerExchange,
    escape_user,
    parse_client_first,
    unescape_user,
)
from twinlog.rpc.policy.scram_store import FileScramStore

# RFC 7677 section 3
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_exchange(known: dict[str, ScramCredential]) -> ServerExchange:
    return ServerExchange(SCRAM_SHA_256, known.get, server_nonce=RFC_SERVER_NONCE)


def test_rfc_7677_vector_gives_the_rfc_messages() -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    exchange = _rfc_exchange({"user": credential})
    assert exchange.first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert exchange.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert exchange.user == "user"


def test_a_wrong_proof_and_an_unknown_user_are_refused_alike() -> None:
    wrong = ScramCredential.from_password(SCRAM_SHA_256, "not-pencil", 4096, RFC_SALT)
    exchange = _rfc_exchange({"user": wrong})
    exchange.first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError) as wrong_password:
        exchange.final(RFC_CLIENT_FINAL)
    unknown = _rfc_exchange({})
    server_first = unknown.first(RFC_CLIENT_FIRST)
    assert server_first.startswith(b"r=rOprNGfwEbeRWgbNEkqO%hvYD") and b",i=4096" in server_first
    with pytest.raises(ScramError) as unknown_user:
        unknown.final(RFC_CLIENT_FINAL)
    assert str(wrong_password.value) == str(unknown_user.value)
    assert "password is wrong" in str(unknown_user.value)


@pytest.mark.parametrize(
    "client_final",
    [
        RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # another gs2 header
        RFC_CLIENT_FINAL.replace(b"r=rOpr", b"r=xOpr"),  # another nonce
        RFC_CLIENT_FINAL.replace(b"$k0,", b"$k0x,"),  # the server's nonce, then more
        RFC_CLIENT_FINAL.replace(b"r=rOprNGfwEbeRWgbNEkqO", b"r="),  # the server's part only
        RFC_CLIENT_FINAL.split(b",p=")[0],  # no proof
        RFC_CLIENT_FINAL[:-8] + b"AAAAAAA=",  # a changed proof
    ],
)
def test_a_bad_client_final_is_refused(client_final: bytes) -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    exchange = _rfc_exchange({"user": credential})
    exchange.first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError):
        exchange.final(client_final)


@pytest.mark.parametrize(
    "client_first",
    [b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"n,,n=us=3Xer,r=abc", b"hello", b"\xff"],
)
def test_a_bad_client_first_is_refused(client_first: bytes) -> None:
    with pytest.raises(ScramError):
        _rfc_exchange({}).first(client_first)


def test_user_names_are_escaped() -> None:
    assert escape_user("a,b=c") == "a=2Cb=3Dc"
    assert unescape_user("a=2Cb=3Dc") == "a,b=c"
    assert parse_client_first(b"n,,n=a=2Cb=3Dc,r=xyz").user == "a,b=c"
    assert parse_client_first(b"n,a=a=2Cb,n=a=2Cb,r=xyz").gs2_header == "n,a=a=2Cb,"
    with pytest.raises(ScramError):
        parse_client_first(b"n,a=mallory,n=alice,r=xyz")  # acting as another


def test_limits_of_a_credential() -> None:
    with pytest.raises(ValueError, match=r"4096\.\.16384"):
        ScramCredential.from_password(SCRAM_SHA_512, "pw", iterations=1000)
    with pytest.raises(ValueError, match="salt"):
        ScramCredential.from_password(SCRAM_SHA_512, "pw", salt=b"abc")
    with pytest.raises(ValueError, match="not a SCRAM mechanism"):
        ScramCredential.from_password("SCRAM-SHA-1", "pw")


def test_the_store_keeps_keys_not_passwords(tmp_path: Path) -> None:
    path = tmp_path / "scram-credentials"
    store = FileScramStore(path)
    password = "correct horse battery staple"
    credential = ScramCredential.from_password(SCRAM_SHA_512, password, 4096)
    store.set("alice", credential)
    store.set("alice", ScramCredential.from_password(SCRAM_SHA_256, password, 8192))
    other = FileScramStore(path)  # another reader of the same file sees the change
    assert other.credential("alice", SCRAM_SHA_512) == credential
    assert other.mechanisms() == {"alice": [(SCRAM_SHA_256, 8192), (SCRAM_SHA_512, 4096)]}
    raw = path.read_bytes()
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), credential.salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    for secret in (password.encode(), salted, client_key):
        assert secret not in raw and base64.b64encode(secret) not in raw
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert other.delete("alice", SCRAM_SHA_512) and not other.delete("alice", SCRAM_SHA_512)
    assert store.credential("alice", SCRAM_SHA_512) is None
    assert store.mechanisms() == {"alice": [(SCRAM_SHA_256, 8192)]}


def test_the_credentials_file_is_never_readable_by_others(tmp_path: Path) -> None:
    """Created 0600 (not chmod-ed after a rename): a reader racing the write never finds
    it open to others, and a leftover temporary of wider mode is not reused."""
    from twinlog.rpc.policy.scram import SCRAM_SHA_256, ScramCredential
    from twinlog.rpc.policy.scram_store import FILE_NAME

    leftover = tmp_path / f".{FILE_NAME}.tmp"
    leftover.write_bytes(b"")
    leftover.chmod(0o644)
    created: list[int] = []
    real_open = os.open

    def watching_open(path: Any, flags: int, mode: int = 0o777, *args: Any) -> int:
        if str(path).endswith(".tmp"):
            created.append(mode)
        return real_open(path, flags, mode, *args)

    store = FileScramStore(tmp_path / FILE_NAME)
    with mock.patch("os.open", watching_open):
        store.set("carol", ScramCredential.from_password(SCRAM_SHA_256, "pw", 4096))
    assert created == [0o600]
    assert ((tmp_path / FILE_NAME).stat().st_mode & 0o777) == 0o600
