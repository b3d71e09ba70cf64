"""Bad flags and tokens: one clear line (or the right subcommand's usage) and exit 2,
before anything connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.cli.arguments import UsageError
from twinlog.rpc.cli.main import main
from twinlog.rpc.cli.token import resolve_token


def usage_error(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(arguments))
    assert exit_info.value.code == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    return stderr


@pytest.mark.parametrize(
    ("arguments", "usage"),
    [
        (["consume", "t", "--bogus"], "usage: twinlog consume"),
        (["produce", "t", "--bogus"], "usage: twinlog produce"),
        (["topics", "create", "t", "--bogus"], "usage: twinlog topics create"),
        (["txn", "abort", "5", "--bogus"], "usage: twinlog txn abort"),
        (["dump", "f.log", "--bogus"], "usage: twinlog dump"),
    ],
)
def test_an_unknown_option_shows_its_subcommands_usage(
    capsys: pytest.CaptureFixture[str], arguments: list[str], usage: str
) -> None:
    stderr = usage_error(capsys, *arguments)
    assert stderr.startswith(usage), stderr
    assert stderr.splitlines()[-1].endswith("error: unrecognized arguments: --bogus")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["consume", "t", "--max-messages", "-3"], "argument --max-messages: must be > 0, not -3"),
        (["consume", "t", "--max-messages", "0"], "argument --max-messages: must be > 0, not 0"),
        (["consume", "t", "--idle-timeout-ms", "0"], "argument --idle-timeout-ms: must be > 0"),
        (["consume", "t", "--partition", "-1"], "argument --partition: must be >= 0, not -1"),
        (["consume", "t", "--offset", "x"], "argument --offset: expected a whole number, not 'x'"),
        (["produce", "t", "--records-per-txn", "0"], "argument --records-per-txn: must be > 0"),
        (["produce", "t", "--linger-ms", "-5"], "argument --linger-ms: must be >= 0"),
        (["produce", "t", "--delivery-timeout-ms", "0"], "--delivery-timeout-ms: must be > 0"),
        (["produce", "t", "--header", "novalue"], "argument --header: expected KEY=VALUE"),
        (["topics", "list", "--timeout-request-ms", "-1"], "--timeout-request-ms: must be > 0"),
    ],
)
def test_a_bad_count_is_refused_by_argparse(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    stderr = usage_error(capsys, *arguments)
    assert stderr.startswith(f"usage: twinlog {arguments[0]}"), stderr
    assert message in stderr.splitlines()[-1], stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["consume", "t", "--format", "json", "--print-key"], "--print-key applies to --format"),
        (["consume", "t", "--format", "json", "--property", "print.key=true"], "--property"),
        (["produce", "t", "--format", "json", "--key-separator", ":"], "--key-separator"),
        (["produce", "t", "--encoding", "text"], "--encoding applies to --format json"),
        (["produce", "t", "--records-per-txn", "5"], "needs --transactional-id"),
    ],
)
def test_flags_that_do_not_apply_are_refused(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    assert main(arguments) == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("error: ") and message in stderr
    assert len(stderr.splitlines()) == 1


def test_a_token_file_loses_one_trailing_newline(tmp_path: Path) -> None:
    for content, token in [("abc\n", "abc"), ("abc\r\n", "abc"), ("abc", "abc")]:
        (tmp_path / "token").write_text(content, newline="")
        assert resolve_token(str(tmp_path / "token"), None) == token


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("abc\n\n", "a newline at character 4"),
        ("abc \n", "a space at character 4"),
        ("a\tb", "a tab at character 2"),
        ("tökén", "the character 'ö' at character 2"),
        ("\n", "is empty"),
    ],
)
def test_a_token_file_with_other_whitespace_is_refused(
    tmp_path: Path, content: str, problem: str
) -> None:
    (tmp_path / "token").write_text(content)
    with pytest.raises(UsageError, match=problem):
        resolve_token(str(tmp_path / "token"), None)


def test_a_token_flag_or_environment_with_a_newline_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UsageError, match="the token from --token has a newline at character 4"):
        resolve_token(None, "abc\n")
    monkeypatch.setenv("TWINLOG_TOKEN", "abc\n")
    with pytest.raises(UsageError, match="from \\$TWINLOG_TOKEN has a newline"):
        resolve_token(None, None)
    monkeypatch.setenv("TWINLOG_TOKEN", "abc")
    assert resolve_token(None, None) == "abc"
    with pytest.raises(InvalidConfigError, match="cannot read --token-file"):
        resolve_token("/nonexistent/token", None)


def test_a_bad_token_is_one_line_and_exit_2_before_connecting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "token").write_text("two words\n")
    # Port 1 refuses connections: a token check after connecting would say so instead.
    status = main(
        ["topics", "list", "--server", "127.0.0.1:1", "--token-file", str(tmp_path / "token")]
    )
    stderr = capsys.readouterr().err
    assert status == 2, stderr
    assert stderr == (
        f"error: the token from --token-file {tmp_path / 'token'} has a space at character 4; "
        "a bearer token is one word of printable ASCII (a token file may end with one newline)\n"
    )
