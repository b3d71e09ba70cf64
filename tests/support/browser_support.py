"""Headless Chromium for the console's browser tests, and a ``twinlog console`` process.

Chromium and its chromedriver come from the distribution's packages (``apt-get install
chromium chromium-driver``; ``.ci/run`` installs them). Selenium is given the driver's
path, so it never looks for (or downloads) a driver of its own. No tests here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from checkout import ROOT
from server_process import environment

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CONSOLE_LINE = re.compile(r"twinlog console on (http://\S+/) ")
START_TIMEOUT_S = 20.0


def chromium_binary() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError(
        "no Chromium on PATH: the console's browser tests need it "
        "(apt-get install chromium chromium-driver)"
    )


def open_browser() -> Any:
    """A headless Chromium session (selenium's WebDriver), 1280 x 1000."""
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium-manager: never the network
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium_binary()
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
        "--no-first-run",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(15)
    return driver


class ConsoleProcess:
    """``twinlog console --port 0`` with its output in a file. Thread rule: the test's."""

    def __init__(self, log_path: Path, *arguments: str) -> None:
        self.log_path = log_path
        self.arguments = list(arguments)
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __enter__(self) -> ConsoleProcess:
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "twinlog.rpc.cli", "console", "--port", "0",
                 *self.arguments],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=environment(),
            )  # fmt: skip
        deadline_s = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline_s:
            found = CONSOLE_LINE.search(self.log())
            if found:
                self.url = found.group(1)
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"the console did not start; its output:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout_s: float = 10.0) -> int:
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                self.kill()
