"""Pushes lost on purpose between the live bus and the tabs: every tab still converges to the
exact final state of every reply, without a reload.

Real parts: the Celery worker streams from the demo provider through Redis; each tab is a
websocket on the full ASGI stack. Only the hand-over from the process's bus reader to a tab
(`GroupSocket.deliver`) is made lossy, or the web process's announcer late.
"""

from __future__ import annotations

import asyncio
import contextlib
import re

import pytest
from channels.db import database_sync_to_async

from apps.chat.display.bubbles import bubble_fragments
from apps.chat.display.events import Announcer
from apps.chat.live.consumers import GroupSocket
from apps.chat.models import Message, MessageStatus
from apps.chat.records.threads import thread_create
from tests.chat.tabs import Tab
from tests.chat.test_live_streaming import open_tab, post, session_cookie
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

STREAMS = 26  # beside two tabs each: a burst of pushes at every flush
TABS_PER_THREAD = 2
BODY = re.compile(r'<article id="msg-[0-9a-f-]{36}"[^>]*>(.*?)</article>', re.S)


def lossy(monkeypatch, drop) -> list[int]:
    """Make the hand-over to tabs drop the pushes `drop(counter, event)` picks; count them."""
    deliver = GroupSocket.deliver
    dropped, seen = [0], [0]

    def lossy_deliver(self, topic, number, event):
        seen[0] += 1
        if drop(seen[0], event):
            dropped[0] += 1
            return
        deliver(self, topic, number, event)

    monkeypatch.setattr(GroupSocket, "deliver", lossy_deliver)
    return dropped


async def council_of_streams(alice, alice_thread, count, tabs):
    threads = [alice_thread] + [
        await database_sync_to_async(thread_create)(session=alice_thread.session)
        for _ in range(count - 1)
    ]
    cookie = await database_sync_to_async(session_cookie)(alice)
    for thread in threads:
        for _ in range(TABS_PER_THREAD):
            tab = Tab()
            communicator = await open_tab(cookie, thread)
            tabs.append((thread, tab, communicator))
    for _, tab, communicator in tabs:
        while not tab.synced:
            tab.apply(await communicator.receive_from(timeout=10))
    replies = {}
    for n, thread in enumerate(threads):
        _, reply = await post(thread, alice, f"Stream number {n}, please")
        replies[thread.pk] = reply
    return replies


async def synced_empty_tab(user, thread, tabs):
    """One tab on `thread` (its page empty, as htmx sees it), synced; kept in `tabs`."""
    cookie = await database_sync_to_async(session_cookie)(user)
    tab, communicator = Tab(page_is_empty=True), await open_tab(cookie, thread)
    tabs.append((thread, tab, communicator))
    while not tab.synced:
        tab.apply(await communicator.receive_from(timeout=10))
    return tab, communicator


async def close(tabs) -> None:
    """Every tab's socket closed, whatever happened (no app instance outlives the test)."""
    for _, _, communicator in tabs:
        with contextlib.suppress(Exception):
            await communicator.disconnect()


def final_body(message: Message) -> str:
    (fragment,) = bubble_fragments([message])
    return BODY.search(fragment)[1]


async def converge(tabs, replies, timeout: float = 90) -> None:
    """Read every tab until it shows each reply settled exactly as stored."""

    async def follow(thread, tab: Tab, communicator) -> None:
        reply_id = str(replies[thread.pk].public_id)
        async with asyncio.timeout(timeout):
            while True:
                frame = await communicator.receive_from(timeout=timeout)
                tab.apply(frame)
                if tab.status(reply_id) == MessageStatus.DONE and BODY.search(
                    tab.bubble_html(reply_id) or ""
                ):
                    stored = await Message.objects.select_related("thread").aget(
                        pk=replies[thread.pk].pk
                    )
                    expected = await database_sync_to_async(final_body)(stored)
                    if BODY.search(tab.bubble_html(reply_id))[1] == expected:
                        return

    await asyncio.gather(*(follow(*entry) for entry in tabs))


@pytest.mark.slow
async def test_every_tab_converges_when_every_seventh_push_is_lost(
    alice, alice_thread, celery_worker, settings, monkeypatch
):
    settings.PARLEY_DEMO_FIRST_TOKEN_MS = 50
    settings.PARLEY_DEMO_TOKENS_PER_SECOND = 60
    settings.PARLEY_FLUSH_INTERVAL_MS = 40
    dropped = lossy(monkeypatch, lambda n, event: n % 7 == 0)
    tabs: list = []
    try:
        replies = await council_of_streams(alice, alice_thread, STREAMS, tabs)
        await converge(tabs, replies)
    finally:
        await close(tabs)
    assert dropped[0] > 100  # the test did lose pushes, of every kind
    for reply in replies.values():
        stored = await Message.objects.aget(pk=reply.pk)
        assert stored.status == MessageStatus.DONE and stored.text


async def test_every_tab_converges_when_the_finished_push_of_some_replies_is_lost(
    alice, alice_thread, celery_worker, settings, monkeypatch
):
    settings.PARLEY_DEMO_FIRST_TOKEN_MS = 50
    settings.PARLEY_DEMO_TOKENS_PER_SECOND = 60
    settings.PARLEY_FLUSH_INTERVAL_MS = 40

    def finished(n, event):
        html = "".join(event.get("fragments", ()))
        return event.get("type") == "chat.state" and 'data-status="done"' in html and n % 3 != 1

    dropped = lossy(monkeypatch, finished)
    tabs: list = []
    try:
        replies = await council_of_streams(alice, alice_thread, STREAMS, tabs)
        await converge(tabs, replies)
    finally:
        await close(tabs)
    assert dropped[0] >= STREAMS  # most tabs never got their reply's finished push


async def test_a_reply_that_settles_before_its_bubble_is_announced_still_appears(
    alice, alice_thread, celery_worker, fast_demo, monkeypatch
):
    """The worker can be quicker than the web process's announcer: a short reply's finished
    state reaches the tab before the push that appends its bubble. The state has no bubble
    to replace, and the append comes after the tab heard of the reply; the tab must still
    end up showing it, settled, without a reload."""
    fast_demo.PARLEY_DEMO_TOKENS_PER_SECOND = 400
    announce = Announcer._announce

    def settled() -> bool:
        replies = Message.objects.filter(thread=alice_thread).exclude(speaker="user")
        return replies.exists() and not replies.exclude(status=MessageStatus.DONE).exists()

    def late_announce(self, batch):
        wait_until(settled, timeout=30)
        announce(self, batch)

    monkeypatch.setattr(Announcer, "_announce", late_announce)
    tabs: list = []
    try:
        await synced_empty_tab(alice, alice_thread, tabs)
        _, reply = await post(alice_thread, alice, "A short one, please")
        await converge(tabs, {alice_thread.pk: reply}, timeout=30)
    finally:
        await close(tabs)


async def test_text_that_outruns_its_bubbles_announcement_shows_at_once(
    alice, alice_thread, celery_worker, fast_demo, monkeypatch
):
    """The worker's first pieces can reach a tab before the push that announces the reply's
    bubble (live text makes it likelier): the tab fetches the bubble, with its text so far, then and
    there, and follows its deltas — it does not wait (text unseen) for the announcement."""
    import threading

    fast_demo.PARLEY_DEMO_TOKENS_PER_SECOND = 20
    announce, release = Announcer._announce, threading.Event()

    def held_announce(self, batch):
        release.wait(timeout=30)
        announce(self, batch)

    monkeypatch.setattr(Announcer, "_announce", held_announce)
    tabs: list = []
    try:
        tab, communicator = await synced_empty_tab(alice, alice_thread, tabs)
        _, reply = await post(alice_thread, alice, "Take your time")
        reply_id = str(reply.public_id)
        async with asyncio.timeout(20):  # the announcement is held all along
            while not (tab.bubbles.get(reply_id) and tab.delta_text(reply_id)):
                tab.apply(await communicator.receive_from(timeout=20))
        assert not release.is_set()
        release.set()
        await converge(tabs, {alice_thread.pk: reply}, timeout=60)
    finally:
        release.set()
        await close(tabs)
