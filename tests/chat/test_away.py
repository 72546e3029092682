"""While you were away, live (issue 15, item 4): a finished turn reaches every page of its
owner — the sessions list included — as one notice and the session's unread badge; reading
the thread clears the badges everywhere at once. Nothing of it reaches anyone else."""

from __future__ import annotations

import asyncio
import html
import re

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from apps.chat.council.posting import message_post
from apps.chat.display import events
from apps.chat.records.sessions import session_create
from apps.chat.records.threads import thread_create, thread_mark_seen
from config.asgi import application
from tests.chat.probes import frames_before_probe
from tests.chat.test_live_streaming import open_tab, post, session_cookie
from tests.conftest import wait_settled

pytestmark = pytest.mark.django_db(transaction=True)

NOTICE = re.compile(r'<div class="turn-notice" (?P<attrs>[^>]*)></div>')


async def open_page(cookie: bytes | None) -> WebsocketCommunicator:
    """The socket of a page that shows no thread (the sessions list)."""
    headers = [(b"origin", b"http://localhost")]
    if cookie:
        headers.append((b"cookie", cookie))
    communicator = WebsocketCommunicator(application, "/ws/user/", headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


def notices(frames: list[str]) -> list[dict[str, str]]:
    return [
        {key: html.unescape(value) for key, value in re.findall(r'data-(\w+)="([^"]*)"', m[1])}
        for frame in frames
        for m in NOTICE.finditer(frame)
    ]


def badge(frames: list[str], session) -> str:
    """The last state of the session's badge the frames carried: its count, or "" if hidden."""
    pattern = re.compile(
        rf'<span class="unread-badge" id="unread-{session.public_id}"([^>]*)>(\d+)'
    )
    found = [m for frame in frames for m in pattern.finditer(frame)]
    assert found, "no badge for the session was pushed"
    attrs, count = found[-1].groups()
    return "" if " hidden" in attrs else count


async def collect(communicator, until, timeout: float = 30) -> list[str]:
    frames: list[str] = []
    async with asyncio.timeout(timeout):
        while not until(frames):
            frames.append(await communicator.receive_from(timeout=timeout))
    return frames


async def test_a_finished_turn_reaches_the_owners_pages_once_with_the_badge(
    alice, bob, alice_thread, celery_worker, fast_demo
):
    alice_page = await open_page(await database_sync_to_async(session_cookie)(alice))
    await database_sync_to_async(session_create)(owner=bob, name="Bob's own")
    bob_page = await open_page(await database_sync_to_async(session_cookie)(bob))
    # A council turn: five roles in parallel, then the director, who sees them all.
    posted = await database_sync_to_async(message_post)(
        thread=alice_thread, author=alice, text="@all what should the opening shot be?"
    )
    frames = await collect(alice_page, lambda frames: notices(frames))
    # One notice for the whole turn: every reply has settled, and whatever their settling
    # pushed to Alice came before a probe on her topic.
    await database_sync_to_async(wait_settled)(posted.replies)
    later = await frames_before_probe(alice_page, events.user_group(alice.pk))
    assert notices(later) == []
    (notice,) = notices(frames)
    assert notice["thread"] == str(alice_thread.public_id)
    assert notice["session"] == str(alice_thread.session.public_id)
    assert notice["title"].endswith(" and Director replied")
    assert notice["body"].endswith(f" · {alice_thread.session.name}")
    assert notice["url"] == f"/t/{alice_thread.public_id}/"
    assert badge(frames, alice_thread.session) == "6"
    assert await frames_before_probe(bob_page, events.user_group(bob.pk)) == []  # nor to Bob

    # Read in one tab: the sessions list's badge and the thread's in the sidebar of a tab on
    # another thread of the session go at once.
    other = await database_sync_to_async(thread_create)(session=alice_thread.session)
    sidebar = await open_tab(await database_sync_to_async(session_cookie)(alice), other)
    await collect(sidebar, lambda frames: any('data-synced="true"' in f for f in frames))
    await database_sync_to_async(thread_mark_seen)(thread=alice_thread, user=alice)
    # (A push of the turn's own may still be on its way: read on until the badge's next state.)
    session_badge = f'id="unread-{alice_thread.session.public_id}"'
    frames = await collect(
        alice_page,
        lambda frames: (
            any(session_badge in f for f in frames) and badge(frames, alice_thread.session) == ""
        ),
    )
    assert badge(frames, alice_thread.session) == ""
    frames = await collect(
        sidebar,
        lambda frames: (
            f"unread-{alice_thread.public_id}" in "".join(frames)
            and badge(frames, alice_thread) == ""
        ),
    )
    assert badge(frames, alice_thread) == ""
    await sidebar.disconnect()
    await alice_page.disconnect()
    await bob_page.disconnect()


async def test_a_thread_tab_hears_its_owners_other_sessions(
    alice, alice_thread, celery_worker, fast_demo
):
    elsewhere = await database_sync_to_async(session_create)(owner=alice, name="Elsewhere")
    cookie = await database_sync_to_async(session_cookie)(alice)
    tab = await open_tab(cookie, elsewhere.active_thread)  # the person is on another session
    await post(alice_thread, alice, "hello")
    frames = await collect(tab, lambda frames: notices(frames))
    (notice,) = notices(frames)
    assert notice["session"] == str(alice_thread.session.public_id)
    assert notice["title"] == "Assistant replied"
    await tab.disconnect()


async def test_a_page_without_a_signed_in_person_is_closed():
    communicator = WebsocketCommunicator(
        application, "/ws/user/", [(b"origin", b"http://localhost")]
    )
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_output(timeout=5))["code"] == 4401
