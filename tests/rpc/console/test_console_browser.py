"""The console's pages in headless Chromium, against a real ``twinlog serve`` with tokens
and ACLs on and a real ``twinlog console`` process: each page loads and shows what the
broker holds, and the open transaction is aborted from its page. A screenshot of each
page is kept under pytest's temporary directory (its path is printed; ``-s`` shows it).

One server, one console and one browser session serve the whole module.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import ConsoleProcess, open_browser
from selenium.webdriver.support.ui import Select
from server_process import ServerProcess

from twinlog.rpc.client import Admin, Producer
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.group_offsets import ResetTo

pytestmark = [pytest.mark.slow]

OPS = "ops-token-console-4f1d2a9c7e"
METRICS_TOKEN = "metrics-token-console-8d2b6f1e3a"
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
    (folder / "metrics.token").write_text(METRICS_TOKEN + "\n")
    with ServerProcess(
        folder / "data",
        "--tokens-file", str(folder / "tokens"), "--acl-file", str(folder / "acl"),
        "--metrics-port", "0", "--metrics-token-file", str(folder / "metrics.token"),
    ) as process:  # fmt: skip
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
    metrics = re.search(r"metrics on (http://\S+/metrics)", server.log())
    assert metrics is not None, server.log()
    with ConsoleProcess(
        folder / "console.log",
        "--server", server.address, "--token-file", str(token_file),
        "--metrics", metrics.group(1), "--metrics-token-file", str(folder / "metrics.token"),
    ) as process:  # fmt: skip
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


def wait_for_text(browser: Any, text: str, timeout_s: float, element_id: str | None = None) -> str:
    """Wait until the page (or its element ``element_id``) shows ``text``; that text. A page
    that reloads (after a click, or every 2 s in follow mode) leaves a stale element
    behind: it is read again from the new page."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    by, value = ("id", element_id) if element_id else ("tag name", "body")
    deadline_s = time.monotonic() + timeout_s
    shown = ""
    while time.monotonic() < deadline_s:
        try:
            shown = browser.find_element(by, value).text
        except (StaleElementReferenceException, NoSuchElementException):  # a page between
            time.sleep(0.05)
            continue
        if text in shown:
            return shown
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} on the page after {timeout_s} s; it shows:\n{shown}")


def click_and_wait(browser: Any, element: Any, text: str, timeout_s: float = 5.0) -> str:
    """Click what loads a page, and wait for the new page to show ``text``; its text."""
    element.click()
    return wait_for_text(browser, text, timeout_s)


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
    size = browser.find_elements("css selector", "#topics tr")[1].text
    assert re.search(r"[1-9][0-9,]* bytes", size), size  # from the broker's metrics
    click_and_wait(browser, browser.find_element("link text", TOPIC), "Partitions")
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
    click_and_wait(browser, browser.find_element("link text", GROUP), "Lag per partition")
    assert browser.find_element("id", "total-lag").text == "2"
    assert "orders-0" in browser.find_element("css selector", "svg.chart").get_attribute(
        "innerHTML"
    )
    browser.save_screenshot(str(shots / "group.png"))


def test_a_groups_offsets_are_reset_after_a_dry_run(
    browser: Any, console: ConsoleProcess, server: ServerProcess, held: dict[str, Any],
    shots: Path,
) -> None:  # fmt: skip
    visit(browser, console, f"/groups/{GROUP}?pause=1", shots, "group-paused")
    Select(browser.find_element("name", "target")).select_by_visible_text("earliest")
    click_and_wait(browser, browser.find_element("css selector", "#reset button"), "dry run")
    rows = browser.find_element("id", "reset-rows").text
    assert f"{TOPIC} 0 1 0" in rows, rows  # now 1, after 0
    browser.save_screenshot(str(shots / "group-reset-dry-run.png"))
    with Admin(server.address, connection=options()) as admin:
        before = {(r.topic, r.partition): r.committed_offset for r in admin.group_offsets(GROUP)}
    assert before[(TOPIC, 0)] == 1  # the dry run committed nothing
    click_and_wait(browser, browser.find_element("css selector", "button.danger"),
                   f"reset group {GROUP}")  # fmt: skip
    with Admin(server.address, connection=options()) as admin:
        after = {(r.topic, r.partition): r.committed_offset for r in admin.group_offsets(GROUP)}
    assert after[(TOPIC, 0)] == 0
    assert "console.group.reset" in console.log()


def test_follow_mode_shows_a_new_record_without_a_click(
    browser: Any, console: ConsoleProcess, server: ServerProcess, held: dict[str, Any],
    shots: Path,
) -> None:  # fmt: skip
    visit(browser, console, f"/messages?topic={TOPIC}&partition=0&follow=1", shots, "follow")
    with Producer(server.address, connection=options()) as producer:
        producer.send(TOPIC, b"followed", partition=0)
        producer.flush()
    wait_for_text(browser, "followed", 8, element_id="records")  # it reloads every 2 s


def test_the_open_transaction_is_aborted_from_its_page(
    browser: Any, console: ConsoleProcess, server: ServerProcess, held: dict[str, Any],
    shots: Path,
) -> None:  # fmt: skip
    transaction_id = held["transaction_id"]
    text = visit(browser, console, "/transactions", shots, "transactions")
    assert STUCK in text
    assert browser.find_element("id", "commits-decided").text == "0"  # none yet: it is open
    link = browser.find_element("css selector", f"#transaction-{transaction_id} a.danger")
    click_and_wait(browser, link, f"Abort transaction {transaction_id}?")
    browser.save_screenshot(str(shots / "transaction-abort.png"))
    click_and_wait(browser, browser.find_element("id", "confirm-abort"),
                   f"aborted transaction {transaction_id}")  # fmt: skip
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
    click_and_wait(browser, browser.find_element("css selector", "form.inline button"),
                   "created topic scratch")  # fmt: skip
    assert len(browser.find_elements("css selector", "#partitions tr")) == 1 + 3
    click_and_wait(browser, browser.find_element("link text", "Delete…"), "Delete topic scratch?")
    browser.find_element("name", "confirm_name").send_keys("scratch")
    browser.save_screenshot(str(shots / "topic-delete.png"))
    click_and_wait(browser, browser.find_element("css selector", "button.danger"),
                   "deleted topic scratch")  # fmt: skip
    with Admin(server.address, connection=options()) as admin:
        assert "scratch" not in admin.list_topics()


def test_a_request_for_another_host_name_is_refused(console: ConsoleProcess) -> None:
    """A page elsewhere that points a name of its own at 127.0.0.1 (DNS rebinding)."""
    parsed = urllib.parse.urlsplit(console.url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=5)
    try:
        connection.request("GET", "/topics", headers={"Host": f"rebound.example:{parsed.port}"})
        answer = connection.getresponse()
        body = answer.read()
    finally:
        connection.close()
    assert answer.status == 400 and TOPIC.encode() not in body


def test_sigterm_stops_the_console_gracefully(console: ConsoleProcess) -> None:
    started_s = time.monotonic()
    assert console.stop() == 0
    elapsed_s = time.monotonic() - started_s
    print(f"\nthe console stopped {elapsed_s:.2f} s after SIGTERM")
    assert elapsed_s < 3  # the browser's idle keep-alive connection does not hold it
    assert console.log().rstrip().endswith("console stopped")
