"""The bearer token of a command: from --token-file, --token or $TWINLOG_TOKEN, checked.

gRPC sends the token in a metadata value, which must be printable ASCII; a token with a
newline used to reach gRPC, which logged its internal lines and failed with "Invalid
metadata". A token file loses one trailing newline (as curl and kubectl read them: an
editor adds one); anything else that is not printable ASCII is refused here, naming
where the token came from.
"""

from __future__ import annotations

import os
from pathlib import Path

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.cli.arguments import UsageError
from twinlog.rpc.client.connection import TOKEN_ENVIRONMENT

PRINTABLE_MIN = 0x21  # "!": a space is refused too, it would split the header
PRINTABLE_MAX = 0x7E  # "~"


def _without_one_newline(text: str) -> str:
    for newline in ("\r\n", "\n"):
        if text.endswith(newline):
            return text[: -len(newline)]
    return text


def read_token_file(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as error:
        raise InvalidConfigError(f"cannot read --token-file {path}: {error.strerror}") from None
    token = _without_one_newline(text)
    if not token:
        raise UsageError(f"--token-file {path} is empty; put the bearer token in it")
    check_token(token, f"--token-file {path}")
    return token


def _describe(character: str) -> str:
    names = {" ": "a space", "\t": "a tab", "\n": "a newline", "\r": "a carriage return"}
    return names.get(character, f"the character {character!r}")


def check_token(token: str, source: str) -> None:
    """Raise UsageError unless every character of ``token`` is printable ASCII, no space."""
    for index, character in enumerate(token):
        if not PRINTABLE_MIN <= ord(character) <= PRINTABLE_MAX:
            raise UsageError(
                f"the token from {source} has {_describe(character)} at character {index + 1}; "
                "a bearer token is one word of printable ASCII (a token file may end with "
                "one newline)"
            )


def resolve_token(token_file: str | None, token: str | None) -> str | None:
    """The token to send, or None: --token-file, else --token, else $TWINLOG_TOKEN."""
    if token_file:
        return read_token_file(token_file)
    if token:
        check_token(token, "--token")
        return token
    from_environment = os.environ.get(TOKEN_ENVIRONMENT)
    if from_environment:
        check_token(from_environment, f"${TOKEN_ENVIRONMENT}")
        return from_environment
    return None
