"""The console's pages in headless Chromium, against a real ``twinlog serve`` with tokens
and ACLs on and a real ``twinlog console`` process: each page loads and shows what the
broker holds, and the open transaction is aborted from its page. A screenshot of each
page is kept under pytest's temporary directory (its path is printed; ``-s`` shows it).

One server, one console and one browser session serve the whole module.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import ConsoleProcess, open_browser
from server_process import ServerProcess

from twinlog.rpc.client import Admin, Producer
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.group_offsets import ResetTo

pytestmark = [pytest.mark.slow]

OPS = "ops-token-console-4f1d2a9c7e"
TOKENS = f"{OPS} ops\n"
ACL = """
ops all *
ops all group:*
ops all transactional-id:*
ops read __consumer_offsets
"""
TOPIC = "orders"
VALUE = {"customer": "console-test", "amount": 42}
GROUP = "billing"
STUCK = "stuck-loader"


def options() -> ConnectionOptions:
    return ConnectionOptions(token=OPS, request_timeout_ms=5_000)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console")


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[ServerProcess]:
    (folder / "tokens").write_text(TOKENS)
    (folder / "acl").write_text(ACL)
    with ServerProcess(
        folder / "data", "--tokens-file", str(folder / "tokens"), "--acl-file", str(folder / "acl")
    ) as process:
        yield process


@pytest.fixture(scope="module")
def held(server: ServerProcess) -> Iterator[dict[str, Any]]:
    """What the broker holds: three records on orders-0 (JSON, binary, a null value), a
    group two records behind, and a transaction left open."""
    with Admin(server.address, connection=options()) as admin:
        admin.create_topic(TOPIC, 2)
        with Producer(server.address, connection=options()) as producer:
            producer.send(TOPIC, json.dumps(VALUE).encode(), key=b"order-1", partition=0)
            producer.send(TOPIC, b"\xff\xfe binary", key=b"order-2", partition=0,
                          headers=[("trace", b"abc")])  # fmt: skip
            producer.send(TOPIC, None, key=b"order-3", partition=0)
            producer.flush()
        admin.reset_group_offsets(GROUP, [(TOPIC, 0)], ResetTo.offset(1))
        stuck = Producer(
            server.address,
            transactional_id=STUCK,
            transaction_timeout_ms=600_000,
            connection=options(),
        )
        stuck.init_transactions()
        transaction_id = stuck.begin_transaction()
        stuck.send(TOPIC, b"never read", partition=1)
        stuck.flush()
        try:
            yield {"transaction_id": transaction_id}
        finally:
            stuck.close(timeout_ms=1_000)


@pytest.fixture(scope="module")
def console(folder: Path, server: ServerProcess) -> Iterator[ConsoleProcess]:
    token_file = folder / "ops.token"
    token_file.write_text(OPS + "\n")
    with ConsoleProcess(
        folder / "console.log", "--server", server.address, "--token-file", str(token_file)
    ) as process:
        yield process
    print(f"\nconsole log: {folder / 'console.log'}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = open_browser()
    try:
        yield driver
    finally:
        driver.quit()


def visit(browser: Any, console: ConsoleProcess, path: str, shots: Path, name: str) -> str:
    """Open the page, keep its screenshot, return its text."""
    started_s = time.monotonic()
    browser.get(console.url.rstrip("/") + path)
    elapsed_s = time.monotonic() - started_s
    shot = shots / f"{name}.png"
    browser.save_screenshot(str(shot))
    print(f"\nscreenshot of {path}: {shot} ({elapsed_s:.2f} s)")
    assert elapsed_s < 5, f"{path} took {elapsed_s:.1f} s"
    text: str = browser.find_element("tag name", "body").text
    assert "Traceback" not in text
    return text


@pytest.fixture(scope="module")
def shots(folder: Path) -> Path:
    path = folder / "screenshots"
    path.mkdir()
    return path


def test_overview_shows_the_broker_and_the_open_transaction(
    browser: Any, console: ConsoleProcess, held: dict[str, Any], shots: Path
) -> None:
    text = visit(browser, console, "/", shots, "overview")
    assert "A single-node server" in text
    assert browser.find_element("id", "brokers-live").text == "1"
    assert browser.find_element("id", "open-transactions").text == "1"
    assert GROUP in browser.find_element("id", "group-lag").text
    assert browser.find_elements("css selector", "svg.chart")


def test_topics_list_and_a_topics_partitions(
    browser: Any, console: ConsoleProcess, held: dict[str, Any], shots: Path
) -> None:
    text = visit(browser, console, "/topics", shots, "topics")
    assert TOPIC in text
    browser.find_element("link text", TOPIC).click()
    rows = browser.find_elements("css selector", "#partitions tr")
    assert len(rows) == 1 + 2  # the header, two partitions
    assert "retention.ms" in browser.find_element("id", "settings").text
    browser.save_screenshot(str(shots / "topic.png"))


def test_messages_show_the_produced_records_honestly(
    browser: Any, console: ConsoleProcess, held: dict[str, Any], shots: Path
) -> None:
    visit(
        browser,
        console,
        f"/messages?topic={TOPIC}&partition=0&start=beginning&mode=json",
        shots,
        "messages",
    )
    values = [cell.text for cell in browser.find_elements("css selector", "#records td.value")]
    assert values[0] == json.dumps(VALUE, indent=2)  # pretty JSON
    assert values[1].startswith("\\xff\\xfe binary")  # not UTF-8: escaped, and said so
    assert "not JSON" in values[1] or "not UTF-8" in values[1]
    assert values[2] == "null"  # a null value, not an empty string
    assert "trace: abc" in browser.find_element("id", "records").text
    visit(browser, console, f"/messages?topic={TOPIC}&partition=0&start=offset&value=1&mode=hex",
          shots, "messages-hex")  # fmt: skip
    assert "ff fe 20 62 69 6e 61 72 79" in browser.find_element("id", "records").text


def test_a_group_shows_its_lag(
    browser: Any, console: ConsoleProcess, held: dict[str, Any], shots: Path
) -> None:
    visit(browser, console, "/groups", shots, "groups")
    browser.find_element("link text", GROUP).click()
    assert browser.find_element("id", "total-lag").text == "2"
    assert "orders-0" in browser.find_element("css selector", "svg.chart").get_attribute(
        "innerHTML"
    )
    browser.save_screenshot(str(shots / "group.png"))


def test_the_open_transaction_is_aborted_from_its_page(
    browser: Any, console: ConsoleProcess, server: ServerProcess, held: dict[str, Any],
    shots: Path,
) -> None:  # fmt: skip
    transaction_id = held["transaction_id"]
    text = visit(browser, console, "/transactions", shots, "transactions")
    assert STUCK in text
    browser.find_element("css selector", f"#transaction-{transaction_id} a.danger").click()
    assert f"Abort transaction {transaction_id}?" in browser.find_element("tag name", "h1").text
    browser.save_screenshot(str(shots / "transaction-abort.png"))
    browser.find_element("id", "confirm-abort").click()
    assert f"aborted transaction {transaction_id}" in browser.find_element("tag name", "body").text
    with Admin(server.address, connection=options()) as admin:
        assert transaction_id not in [t.transaction_id for t in admin.list_transactions()]
    assert "console.transaction.abort" in console.log()


def test_a_topic_is_created_and_deleted_with_a_confirmation(
    browser: Any, console: ConsoleProcess, server: ServerProcess, held: dict[str, Any],
    shots: Path,
) -> None:  # fmt: skip
    visit(browser, console, "/topics", shots, "topics-before-create")
    browser.find_element("name", "name").send_keys("scratch")
    browser.find_element("name", "partitions").clear()
    browser.find_element("name", "partitions").send_keys("3")
    browser.find_element("css selector", "form.inline button").click()
    assert len(browser.find_elements("css selector", "#partitions tr")) == 1 + 3
    browser.find_element("link text", "Delete…").click()
    browser.find_element("name", "confirm_name").send_keys("scratch")
    browser.save_screenshot(str(shots / "topic-delete.png"))
    browser.find_element("css selector", "button.danger").click()
    assert "deleted topic scratch" in browser.find_element("tag name", "body").text
    with Admin(server.address, connection=options()) as admin:
        assert "scratch" not in admin.list_topics()
