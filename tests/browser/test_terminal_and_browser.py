"""The browser and the terminal on one thread (issue 25): what `parley chat` sends streams
into an open Chromium tab without a reload, and what the tab sends appears in the terminal
live."""

from __future__ import annotations

import asyncio
import threading

import pytest
from playwright.sync_api import expect

from apps.api.tokens import token_create
from parley_cli.client import Api
from parley_cli.config import Config
from parley_cli.tui import ParleyChat
from tests.browser.test_group_chat import bubble, send
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_terminal_and_a_browser_tab_see_each_other_live(chat, alice, asgi_server, fast_demo):
    config = Config(url=asgi_server.url, token=token_create(user=alice, name="t", scope="post")[1])
    posted, seen, finished = threading.Event(), threading.Event(), threading.Event()
    failure: list[BaseException] = []

    async def terminal() -> None:
        app = ParleyChat(Api(config), session=chat.session.name)
        async with app.run_test(size=(160, 50)) as pilot:
            while "live" not in app.link:
                await asyncio.sleep(0.05)
            await pilot.click("#composer")
            await pilot.press(*"@assistant hello from the terminal", "enter")
            posted.set()
            for _ in range(400):
                texts = [panel.reply.text for panel in app.panels.values()]
                if "@director hello from the browser" in texts:
                    director = [p for p in app.panels.values()
                                if p.reply.data["speaker"] == "director"]  # fmt: skip
                    if director and director[0].reply.status == "done":
                        seen.set()
                        break
                await asyncio.sleep(0.05)
            await asyncio.to_thread(finished.wait, 20)

    def run() -> None:
        try:
            asyncio.run(terminal())
        except BaseException as exc:  # reported by the test below
            failure.append(exc)
            posted.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert posted.wait(20)
        # The tab shows the terminal's message and its reply without a reload.
        expect(chat.locator("#transcript")).to_contain_text("hello from the terminal")
        expect(bubble(chat, "assistant")).to_have_attribute(
            "data-status", "done", timeout=scaled(20_000)
        )
        send(chat, "@director hello from the browser")
        assert seen.wait(20), "the terminal did not show the browser's message and reply"
    finally:
        finished.set()
        thread.join(30)
    assert not failure, failure
