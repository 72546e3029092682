"""Presence and typing in a shared room: live, from Redis (no database write), gone at once
when a tab closes and within seconds when its process dies."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.chat import livestate
from apps.chat.live import presence
from apps.chat.records.rooms import member_add
from tests.chat.tabs import Tab
from tests.chat.test_live_streaming import open_tab, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


async def synced_tab(user, thread):
    communicator = await open_tab(await database_sync_to_async(session_cookie)(user), thread)
    tab = Tab()
    async with asyncio.timeout(10):
        while not tab.synced:
            tab.apply(await communicator.receive_from(timeout=10))
    return communicator, tab


async def until(communicator, tab, check, timeout=10):
    async with asyncio.timeout(timeout):
        while not check(tab.frames):
            tab.apply(await communicator.receive_from(timeout=timeout))


def presence_line(frames) -> str:
    lines = [f for f in frames if 'id="room-presence"' in f]
    return lines[-1] if lines else ""


async def test_presence_shows_who_is_here_and_clears_when_a_tab_closes(alice, bob, alice_thread):
    await database_sync_to_async(member_add)(session=alice_thread.session, by=alice, username="bob")
    alice_tab, alice_seen = await synced_tab(alice, alice_thread)
    await until(alice_tab, alice_seen, lambda f: f'data-user="{alice.pk}"' in presence_line(f))
    bob_tab, bob_seen = await synced_tab(bob, alice_thread)
    await until(alice_tab, alice_seen, lambda f: "bob" in presence_line(f))
    assert "alice" in presence_line(alice_seen.frames)
    await until(
        bob_tab, bob_seen, lambda f: "alice" in presence_line(f) and "bob" in presence_line(f)
    )

    # Typing reaches the others' tabs, not the typist's own; nothing is written.
    with CaptureQueriesContext(connection) as queries:
        await bob_tab.send_to(text_data=json.dumps({"type": "typing"}))
        await until(alice_tab, alice_seen, lambda f: any('data-name="bob"' in x for x in f))
    writes = [q for q in queries.captured_queries if not q["sql"].startswith("SELECT")]
    assert writes == []
    assert not any('data-name="bob"' in frame for frame in bob_seen.frames)

    await bob_tab.disconnect()
    started = time.monotonic()
    await until(alice_tab, alice_seen, lambda f: "bob" not in presence_line(f))
    assert time.monotonic() - started < 3
    await alice_tab.disconnect()


async def test_a_tab_whose_process_died_leaves_the_room_within_seconds(
    alice, bob, alice_thread, settings
):
    await database_sync_to_async(member_add)(session=alice_thread.session, by=alice, username="bob")
    session_id = str(alice_thread.session.public_id)
    redis = livestate.async_client()
    ghost = presence.entry(bob.pk, str(alice_thread.public_id), "ghost")
    # A tab of a process that died: its last heartbeat long past, no socket to say goodbye.
    await redis.zadd(
        presence._key(session_id), {ghost: time.time() - presence.PRESENCE_TTL_SECONDS - 1}
    )
    alice_tab, seen = await synced_tab(alice, alice_thread)
    await until(alice_tab, seen, lambda f: "alice" in presence_line(f))
    assert "bob" not in presence_line(seen.frames)  # a stale entry is never shown
    assert await redis.zscore(presence._key(session_id), ghost) is not None
    await presence.beat(
        redis, session_id, presence.entry(alice.pk, str(alice_thread.public_id), "x")
    )
    assert await redis.zscore(presence._key(session_id), ghost) is None  # and is pruned
    await alice_tab.disconnect()


async def test_a_room_of_one_keeps_no_presence(alice, alice_thread):
    tab, seen = await synced_tab(alice, alice_thread)
    await tab.send_to(text_data=json.dumps({"type": "typing"}))
    assert await tab.receive_nothing(timeout=1)
    assert not presence_line(seen.frames)
    assert not await livestate.async_client().exists(
        presence._key(str(alice_thread.session.public_id))
    )
    await tab.disconnect()


async def test_a_viewers_typing_is_shown_to_nobody(alice, bob, charlie, alice_thread):
    session = alice_thread.session
    await database_sync_to_async(member_add)(session=session, by=alice, username="bob")
    await database_sync_to_async(member_add)(
        session=session, by=alice, username="charlie", role="viewer"
    )
    alice_tab, alice_seen = await synced_tab(alice, alice_thread)
    charlie_tab, _ = await synced_tab(charlie, alice_thread)
    bob_tab, _ = await synced_tab(bob, alice_thread)
    await charlie_tab.send_to(text_data=json.dumps({"type": "typing"}))
    await asyncio.sleep(0)  # charlie's frame is handled before bob's is sent
    await bob_tab.send_to(text_data=json.dumps({"type": "typing"}))
    # The topic is ordered: had the viewer's typing gone out, it would arrive before bob's.
    await until(alice_tab, alice_seen, lambda f: any('data-name="bob"' in x for x in f))
    assert not any('data-name="charlie"' in frame for frame in alice_seen.frames)
    for tab in (alice_tab, bob_tab, charlie_tab):
        await tab.disconnect()
