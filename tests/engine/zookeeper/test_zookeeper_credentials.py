"""The ZooKeeper credentials file: one ``digest USER:PASSWORD`` line, comments allowed;
every mistake an InvalidConfigError naming the file and line, and the password in no
error, no log line and no repr."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kazoo.security import Permissions

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.zookeeper.credentials import (
    PASSWORD_LENGTH_MIN,
    ZooKeeperCredential,
    ensure_zookeeper_credential_file,
    load_zookeeper_credential,
)

PASSWORD = "s3cret-Pa55word:with-colon"


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "zookeeper.auth"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_file_gives_the_user_password_acl_and_auth_data(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    path = write(tmp_path, f"# the cluster's credential\n\n  digest twinlog:{PASSWORD}  \n# end\n")
    credential = load_zookeeper_credential(path)
    assert (credential.user, credential.password) == ("twinlog", PASSWORD)
    assert credential.auth_data == [("digest", f"twinlog:{PASSWORD}")]
    [entry] = credential.acl
    assert entry.perms == Permissions.ALL and entry.id.scheme == "digest"
    assert entry.id.id.startswith("twinlog:") and PASSWORD not in entry.id.id  # a hash
    assert credential.grants(entry) == Permissions.ALL
    assert ZooKeeperCredential("other", PASSWORD).grants(entry) == 0
    assert PASSWORD not in repr(credential) and PASSWORD not in str(credential)
    assert "twinlog" in caplog.text and PASSWORD not in caplog.text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "0 credential lines"),
        ("# only a comment\n", "0 credential lines"),
        (f"digest a:{PASSWORD}\ndigest b:{PASSWORD}\n", "2 credential lines"),
        ("digest twinlog-no-colon-password\n", r"line 1: not in the form 'digest USER:PASSWORD'"),
        (f"digest twinlog{PASSWORD}\n", "line 1: .*password is 10 characters long"),
        (f"# c\ndigest twinlog: {PASSWORD}\n", r"line 2: not in the form .*\(3 words\)"),
        (f"twinlog:{PASSWORD}\n", r"not in the form .*\(1 words\)"),
        (f"sasl twinlog:{PASSWORD}\n", "scheme 'sasl' is not supported, only 'digest'"),
        (
            "digest twinlog:short\n",
            f"password is 5 characters long \\(not shown\\), expected at least {PASSWORD_LENGTH_MIN}",
        ),
        (f"digest :{PASSWORD}\n", "credential user is 0 characters long"),
        ("digest twinlog:pässwörd-long-enough\n", "not ASCII"),
    ],
)
def test_a_bad_file_is_a_clear_error_that_never_shows_the_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, expected: str
) -> None:
    caplog.set_level(logging.DEBUG)
    path = write(tmp_path, text)
    with pytest.raises(InvalidConfigError, match=expected) as error:
        load_zookeeper_credential(path)
    message = str(error.value)
    assert str(path) in message
    for secret in (PASSWORD, "s3cret", "no-colon-password", "short", "pässwörd"):
        assert secret not in message and secret not in caplog.text


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match=r"missing\.auth does not exist; write one line"):
        load_zookeeper_credential(tmp_path / "missing.auth")


def test_a_file_others_can_read_is_loaded_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, f"digest twinlog:{PASSWORD}\n", mode=0o644)
    with caplog.at_level(logging.WARNING):
        load_zookeeper_credential(path)
    assert "can be read by other users (mode 644): chmod 600" in caplog.text
    assert PASSWORD not in caplog.text


def test_a_credential_made_in_code_is_checked_too() -> None:
    with pytest.raises(InvalidConfigError, match="at least"):
        ZooKeeperCredential("twinlog", "short")
    with pytest.raises(InvalidConfigError, match="without ':'"):
        ZooKeeperCredential("a:b", PASSWORD)
    with pytest.raises(InvalidConfigError, match="without spaces"):
        ZooKeeperCredential("twinlog", "with a space in it")


def test_a_credential_file_is_made_once_private_and_then_kept(tmp_path: Path) -> None:
    path = tmp_path / "cluster" / "zookeeper.auth"
    made = ensure_zookeeper_credential_file(path)
    assert made.user == "twinlog" and len(made.password) == 32
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_zookeeper_credential(path) == made
    assert ensure_zookeeper_credential_file(path, user="other") == made  # never replaced
    assert ensure_zookeeper_credential_file(tmp_path / "b.auth").password != made.password
