"""The suite's Chromium (Debian's, driven by Playwright), one per test process.

Now and then Chromium never answers a request to close a browser context (or itself): the
call waits forever, and a test that passed ends in a timeout at its teardown. A close here is
given `CLOSE_LIMIT_SECONDS`; past it, this Chromium is killed, a warning says so, and the next
context starts a new one. A test's own checks are never skipped by it.
"""

from __future__ import annotations

import contextlib
import threading
import warnings

import psutil

CLOSE_LIMIT_SECONDS = 30.0
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class HungChromium(UserWarning):
    """Chromium did not close in time and was killed (the test's result stands)."""


class TestChromium:
    __test__ = False  # not a test class, whatever its name says

    def __init__(self, playwright, *, close_limit: float = CLOSE_LIMIT_SECONDS) -> None:
        self.playwright = playwright
        self.close_limit = close_limit
        self.browser = self._launch()

    def _launch(self):
        before = set(_main_processes())
        browser = self.playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=LAUNCH_ARGS
        )
        (self.main_process,) = set(_main_processes()) - before
        return browser

    def new_context(self, **options):
        if not self.browser.is_connected():  # killed at a hung close: start another
            self.browser = self._launch()
        return self.browser.new_context(**options)

    def close_context(self, context) -> None:
        self._bounded(context.close, "a browser context")

    def close(self) -> None:
        if self.browser.is_connected():
            self._bounded(self.browser.close, "the browser")

    def _bounded(self, close, what: str) -> None:
        from playwright.sync_api import Error

        running, killed = self.browser_processes(), threading.Event()

        def kill() -> None:
            killed.set()
            for process in running:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()

        timer = threading.Timer(self.close_limit, kill)
        timer.daemon = True
        timer.start()
        try:
            close()
        except Error:
            if not killed.is_set():  # not the kill's doing: a real failure
                raise
        finally:
            timer.cancel()
        if killed.is_set():
            warnings.warn(
                f"Chromium did not close {what} within {self.close_limit:.0f} s; it was "
                "killed, and the next browser context starts a new one.",
                HungChromium,
                stacklevel=3,
            )

    def browser_processes(self) -> list[psutil.Process]:
        """This Chromium's processes: its main one (which Playwright's driver started) and
        the processes it started."""
        try:
            return [self.main_process, *self.main_process.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


def _main_processes() -> list[psutil.Process]:
    """The Chromiums this test process runs: Playwright's driver, a child of this process,
    starts them, so they are its descendants; another test process's are not."""
    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            parent = process.parent()
            if process.name() == "chromium" and parent and parent.name() != "chromium":
                found.append(process)
    return found
