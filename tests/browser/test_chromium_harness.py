"""The suite's own Chromium: a close that Chromium never answers ends in a warning and a new
browser for the next test, not in a timeout of a test that passed."""

from __future__ import annotations

import signal

import psutil
import pytest

from tests.chromium import HungChromium, TestChromium
from tests.conftest import wait_until

pytestmark = pytest.mark.browser


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE  # killed, not yet waited for
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(90)  # without the kill, the close would wait forever
def test_a_close_chromium_never_answers_kills_it_warns_and_the_next_context_gets_a_new_one(
    browser_session,
):
    # A Chromium of its own, on the suite's Playwright: the suite's goes on untouched.
    chromium = TestChromium(browser_session.playwright, close_limit=2)
    context = chromium.new_context()
    context.new_page().set_content("<p>hello</p>")
    frozen = chromium.browser_processes()
    assert frozen
    for process in frozen:  # a Chromium that no longer answers anything
        process.send_signal(signal.SIGSTOP)
    with pytest.warns(HungChromium, match="did not close a browser context within 2 s"):
        chromium.close_context(context)
    assert not chromium.browser.is_connected()
    wait_until(lambda: all(gone(process) for process in frozen), timeout=10)

    page = chromium.new_context().new_page()  # a new Chromium
    page.set_content("<p>again</p>")
    assert page.inner_text("p") == "again"
    chromium.close()
    assert not chromium.browser.is_connected()
    assert browser_session.browser.is_connected()  # the suite's own Chromium
