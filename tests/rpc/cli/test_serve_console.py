"""``twinlog serve --console-port``: the web console beside the broker, acting with its own
token through the server's port (so the ACLs apply), stopped with the server; and the
flag combinations it refuses before the broker opens."""

from __future__ import annotations

import re
import socket
import urllib.request
from pathlib import Path

import pytest
from server_process import ServerProcess, run_cli

from twinlog.rpc.client import Admin, Producer
from twinlog.rpc.client.connection_options import ConnectionOptions

pytestmark = pytest.mark.slow  # a server process

TOKEN = "serve-console-token-5b8e1d"
CONSOLE_LINE = re.compile(r"console on (http://\S+/) for (\S+)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_console_serves_beside_the_broker(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text(f"{TOKEN} ops\n")
    (tmp_path / "acl").write_text("ops all *\nops all group:*\nops all transactional-id:*\n")
    (tmp_path / "ops.token").write_text(TOKEN + "\n")
    server = ServerProcess(
        tmp_path / "data",
        "--tokens-file", str(tmp_path / "tokens"), "--acl-file", str(tmp_path / "acl"),
        "--console-port", "0", "--console-token-file", str(tmp_path / "ops.token"),
        "--metrics-port", str(free_port()),  # the console reads sizes from it
    )  # fmt: skip
    server.start(port=free_port())
    try:
        found = CONSOLE_LINE.search(server.log())
        assert found is not None, server.log()
        url, target = found.groups()
        assert target == server.address
        options = ConnectionOptions(token=TOKEN)
        with Admin(server.address, connection=options) as admin:
            admin.create_topic("orders", 1)
        with Producer(server.address, connection=options) as producer:
            producer.send("orders", b"sized")
        with urllib.request.urlopen(url + "topics", timeout=10) as page:
            text = page.read().decode()
        assert "Create a topic" in text and "Not permitted" not in text
        assert re.search(r"[1-9][0-9,]* bytes</td>", text), text  # its own metrics
        assert server.stop() == 0
    finally:
        server.kill()
    with pytest.raises(OSError):  # closed with the server
        urllib.request.urlopen(url, timeout=2)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--port", "0", "--console-port", "0"], "needs a fixed --port"),
        (["--port", "7999", "--tokens-file", "TOKENS", "--console-port", "0"],
         "needs --console-token-file"),
    ],
)  # fmt: skip
def test_flags_that_do_not_fit_are_refused_before_the_broker_opens(
    tmp_path: Path, flags: list[str], said: str
) -> None:
    (tmp_path / "tokens").write_text(f"{TOKEN} ops\n")
    flags = [str(tmp_path / "tokens") if flag == "TOKENS" else flag for flag in flags]
    ended = run_cli("serve", "--data-dir", str(tmp_path / "data"), *flags, timeout_s=60)
    assert ended.returncode != 0 and said in ended.stderr, ended.stderr
    assert not (tmp_path / "data").exists()  # refused before the broker opened
