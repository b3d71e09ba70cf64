"""Ctrl-C that always works: exit 130 within a second, whatever the main thread is doing.

Python runs a signal handler only when the main thread next executes Python code; a
main thread blocked in gRPC, in a lock or in a pipe may not for a long time (the issue's
`twinlog produce` against a stalled server ignored SIGINT for over a minute). Python's
C-level handler does write the signal's number to the *wakeup fd* at once, from
whichever thread received it, so a watcher thread reading that pipe sees every Ctrl-C
immediately.

On the first Ctrl-C the watcher runs the command's ``on_interrupt`` (abort the open
transaction, count what was delivered) on a thread of its own, waits for it at most
``CLEANUP_BUDGET_S``, prints its one-line summary and ends the process with 130.
A second Ctrl-C (0.2 s or more after the first) ends it at once. The main thread is left alone: it would otherwise
race the cleanup (two aborts of one transaction).

Thread rule: enter and exit the guard on the main thread (``signal.set_wakeup_fd``
must be called there).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells expect
# The cleanup's share of the one second a Ctrl-C may take; the rest is for printing.
CLEANUP_BUDGET_S = 0.7
# `timeout -s INT` signals its child and then its whole process group: one interrupt
# arrives twice, microseconds apart. A person's second Ctrl-C comes much later.
SAME_INTERRUPT_S = 0.2
_STOP = b"\x00"  # written by __exit__ to end the watcher; signal numbers are never 0


class InterruptFlag:
    """Raised by Ctrl-C; safe to raise from a signal handler, unlike ``threading.Event``.

    A Python signal handler runs on the main thread between two bytecodes, possibly in
    the middle of code that holds a lock. ``Event.set()`` takes the Event's lock, so a
    second Ctrl-C arriving while the first handler is inside ``set()`` (``timeout -s INT``
    sends two, microseconds apart) blocked the main thread on a lock it held itself, and
    the watcher behind it: the process ignored every later Ctrl-C. Setting a bool takes no lock.
    """

    __slots__ = ("_raised",)

    def __init__(self) -> None:
        self._raised = False

    def set(self) -> None:
        self._raised = True

    def is_set(self) -> bool:
        return self._raised


def _write_stderr(line: str) -> None:
    # os.write, not print: sys.stderr's lock may be held by the thread being abandoned.
    with contextlib.suppress(OSError):
        os.write(sys.stderr.fileno(), (line + "\n").encode(errors="replace"))


def _flush_stdout() -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()


class InterruptGuard:
    """While entered, SIGINT ends the process (130) after ``on_interrupt`` (bounded).

    ``on_interrupt`` returns the line to print (or None); it runs on another thread
    while the main thread goes on, so it must only use thread-safe calls. Check
    ``interrupted`` between units of work to stop early.
    """

    def __init__(self, on_interrupt: Callable[[], str | None] | None = None) -> None:
        self.on_interrupt = on_interrupt
        self.interrupted = InterruptFlag()
        self._read_fd = -1
        self._write_fd = -1
        self._previous_wakeup_fd = -1
        self._previous_handler: object = None
        self._watcher: threading.Thread | None = None
        self._first_s: float | None = None  # when the watcher saw the first Ctrl-C
        self._active = False

    def __enter__(self) -> InterruptGuard:
        self._active = threading.current_thread() is threading.main_thread()
        if not self._active:  # signals reach the main thread only: nothing to guard here
            return self
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)  # set_wakeup_fd requires it
        # The Python-level handler only raises the flag (the watcher acts): KeyboardInterrupt
        # in the main thread would run its finally blocks concurrently with the cleanup. It
        # runs on the main thread before its next line, so a command that checks the flag
        # never starts what Ctrl-C asked to stop (a commit after the input's end, say).
        self._previous_handler = signal.signal(
            signal.SIGINT, lambda number, frame: self.interrupted.set()
        )
        self._previous_wakeup_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._watcher = threading.Thread(target=self._watch, name="twinlog-interrupt", daemon=True)
        self._watcher.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self._active:
            return
        if self._first_s is not None or self.interrupted.is_set():
            # The command ended while its cleanup runs: let the watcher end the process
            # with 130 rather than exit 0 as if nothing had happened; if it cannot (its
            # stderr write blocked on a paused pipe), end it here, bounded.
            time.sleep(CLEANUP_BUDGET_S + 1)
            os._exit(EXIT_INTERRUPTED)
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        signal.signal(signal.SIGINT, self._previous_handler)  # type: ignore[arg-type]
        os.write(self._write_fd, _STOP)
        if self._watcher is not None:
            self._watcher.join()
        os.close(self._read_fd)
        os.close(self._write_fd)

    def _watch(self) -> None:
        while True:
            try:
                data = os.read(self._read_fd, 64)
            except InterruptedError:
                continue
            if not data or _STOP in data:
                return
            if signal.SIGINT.value not in data:
                continue
            if self._first_s is not None:
                if time.monotonic() - self._first_s < SAME_INTERRUPT_S:
                    continue  # the same Ctrl-C, delivered twice (see SAME_INTERRUPT_S)
                _flush_stdout()
                _write_stderr("interrupted again: exiting now")
                os._exit(EXIT_INTERRUPTED)
            self._first_s = time.monotonic()
            self.interrupted.set()
            threading.Thread(target=self._finish, name="twinlog-interrupted", daemon=True).start()

    def _finish(self) -> None:
        started_s = time.monotonic()
        summary: list[str | None] = ["interrupted"]

        def clean_up() -> None:
            if self.on_interrupt is not None:
                try:
                    summary[0] = self.on_interrupt()
                except Exception as error:  # reported, then the exit goes on
                    summary[0] = f"interrupted: {type(error).__name__}: {error}"
            _flush_stdout()

        cleanup = threading.Thread(target=clean_up, name="twinlog-cleanup", daemon=True)
        cleanup.start()
        cleanup.join(max(0.0, CLEANUP_BUDGET_S - (time.monotonic() - started_s)))
        if cleanup.is_alive():
            summary[0] = (
                f"interrupted: cleanup did not finish within {CLEANUP_BUDGET_S:g} s; exiting"
            )
        if summary[0]:
            _write_stderr(summary[0])
        os._exit(EXIT_INTERRUPTED)
