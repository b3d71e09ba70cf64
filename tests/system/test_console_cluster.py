"""The console's Overview of a real three-broker cluster (ZooKeeper, tokens, ACLs, broker
certificates): three live brokers and a controller; then broker 3 is SIGKILLed and the
page, still answering within 5 s, shows it down and its partitions under-replicated.
Screenshots are kept under pytest's temporary directory (their paths are printed)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from browser_support import ConsoleProcess, open_browser
from cluster_support import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.crash]

TOPIC = "orders"
WAIT_S = 30.0


def overview(browser: Any, console: ConsoleProcess, shot: Path) -> dict[str, str]:
    started_s = time.monotonic()
    browser.get(console.url)
    elapsed_s = time.monotonic() - started_s
    browser.save_screenshot(str(shot))
    print(f"\nscreenshot: {shot} ({elapsed_s:.2f} s)")
    assert elapsed_s < 5, elapsed_s
    find = browser.find_element
    return {
        name: find("id", name).text
        for name in ("brokers-live", "partitions", "under-replicated", "offline", "brokers")
    }


def test_the_overview_of_three_brokers_and_of_one_down(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    cluster.create_replicated_topic(TOPIC, 3)
    token_file = tmp_path / "operator.token"
    token_file.write_text(f"{cluster.token}\n")
    browser = open_browser()
    try:
        with ConsoleProcess(
            tmp_path / "console.log", "--server", cluster.bootstrap, "--token-file", str(token_file)
        ) as console:
            seen = overview(browser, console, tmp_path / "overview-3.png")
            assert seen["brokers-live"] == "3" and seen["under-replicated"] == "0", seen
            assert seen["partitions"] == "3", seen  # the internal topics' counted apart
            assert seen["brokers"].count("controller") == 2  # the header, and one broker
            cluster.kill(3)
            deadline_s = time.monotonic() + WAIT_S
            while time.monotonic() < deadline_s:
                seen = overview(browser, console, tmp_path / "overview-2.png")
                if seen["brokers-live"] == "2" and seen["under-replicated"] != "0":
                    break
                time.sleep(1)
            assert seen["brokers-live"] == "2", seen
            # Each of the topic's partitions, and the internal topics' (also on 3 replicas).
            assert int(seen["under-replicated"]) >= 3 and seen["offline"] == "0", seen
            body = browser.find_element("tag name", "body").text
            assert all(f"{TOPIC}-{p}" in body for p in range(3)), body
            assert "not registered" in seen["brokers"]
    finally:
        browser.quit()
