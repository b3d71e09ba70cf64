"""``twinlog serve``'s observability flags and its start-up refusals, through ``subprocess``."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

import pytest
from server_process import run_cli

from twinlog.engine.broker.broker import Broker

pytestmark = pytest.mark.slow  # starts processes


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error:" in line]


@pytest.mark.parametrize(
    ("flag", "value"), [("--log-level", "bogus"), ("--log-format", "xml")], ids=["level", "format"]
)
def test_a_mistyped_choice_is_one_error_line_and_exit_2(
    tmp_path: Path, flag: str, value: str
) -> None:
    result = run_cli("serve", "--data-dir", str(tmp_path / "data"), flag, value)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    [line] = error_lines(result.stderr)
    assert line.startswith("twinlog serve: error: argument " + flag)
    assert repr(value) in line  # what was typed, as typed
    assert not (tmp_path / "data").exists()  # refused before anything was opened


def test_help_names_the_observability_flags() -> None:
    result = run_cli("serve", "--help")
    assert result.returncode == 0
    for flag in (
        "--metrics-port",
        "--metrics-host",
        "--metrics-token-file",
        "--metrics-tls-cert",
        "--metrics-tls-key",
        "--log-level",
        "--log-format",
    ):
        assert flag in result.stdout
    assert "DEBUG,INFO,WARNING,ERROR" in result.stdout


def make_unwritable(data_dir: Path) -> tuple[str, tuple[str, ...]]:
    """Make part of a broker's data directory unusable; (the path named, errno names).

    As a normal user: the files of a transaction journal partition become read-only.
    As root, whom permissions do not stop: a file stands where that directory belongs.
    """
    journal = data_dir / "logs" / "__txn_journal-0"
    if os.geteuid() != 0:
        for path in journal.iterdir():
            if path.is_file():
                path.chmod(stat.S_IRUSR)
        journal.chmod(stat.S_IRUSR | stat.S_IXUSR)
        return str(journal), ("EACCES", "EPERM")
    shutil.rmtree(journal)
    journal.write_text("not a directory\n")
    return str(journal), ("EEXIST", "ENOTDIR")


def test_a_partly_unusable_data_directory_is_one_line_and_exit_1(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    Broker.open(data_dir).close()
    path, errno_names = make_unwritable(data_dir)
    try:
        result = run_cli("serve", "--data-dir", str(data_dir), "--port", "0", timeout_s=60)
    finally:
        for item in [data_dir, *data_dir.rglob("*")]:
            if item.is_dir():
                item.chmod(stat.S_IRWXU)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [line] = error_lines(result.stderr)
    assert line.startswith("error: InvalidConfigError: cannot open the broker")
    assert path in line, line
    assert any(f"({name})" in line for name in errno_names), line
    assert not re.search(r"^\s+File ", result.stderr, re.MULTILINE)


def test_a_metrics_port_in_use_is_refused_before_serving(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "serve", "--data-dir", str(tmp_path / "data"), "--port", "0",
            "--metrics-port", str(port),
        )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [line] = error_lines(result.stderr)
    assert f"cannot serve metrics on 127.0.0.1:{port}" in line
    assert "serving on" not in result.stderr


def test_an_unreadable_metrics_token_file_is_one_line_and_exit_1(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-token"
    result = run_cli(
        "serve", "--data-dir", str(tmp_path / "data"), "--port", "0",
        "--metrics-port", "0", "--metrics-token-file", str(missing),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [line] = error_lines(result.stderr)
    assert f"cannot read metrics token file {missing}" in line
    assert "--metrics-token-file" in line
    assert "serving on" not in result.stderr


def test_a_batch_limit_over_the_request_limit_is_refused_before_opening(tmp_path: Path) -> None:
    """--config batch_bytes_max is the broker's (its topics' default limit); a batch that
    large must still fit in a request, or no door could ever bring one."""
    result = run_cli(
        "serve", "--data-dir", str(tmp_path / "data"), "--port", "0",
        "--config", "batch_bytes_max=2097152", "--config", "request_bytes_max=1048576",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [line] = error_lines(result.stderr)
    assert "broker config batch_bytes_max (2097152) exceeds server config" in line
    assert "request_bytes_max (1048576)" in line
    assert not (tmp_path / "data").exists()  # refused before anything was opened


def test_a_kafka_connection_limit_below_one_is_refused_before_opening(tmp_path: Path) -> None:
    result = run_cli(
        "serve", "--data-dir", str(tmp_path / "data"), "--port", "0",
        "--kafka-listener", "127.0.0.1:0", "--kafka-connections-per-address-max", "0",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "twinlog serve: Kafka listener setting connections_per_address_max (twinlog serve "
        "--kafka-connections-per-address-max) is 0, expected 1 or more"
    )
    assert not (tmp_path / "data").exists()  # refused before anything was opened
