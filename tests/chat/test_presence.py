"""Presence and typing in a shared room: live, from Redis (no database write), gone at once
when a tab closes and within seconds when its process dies."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from unittest import mock

import pytest
from channels.db import database_sync_to_async
from django.db.backends import utils

from apps.chat import livestate
from apps.chat.display import events
from apps.chat.live import presence
from apps.chat.records.rooms import member_add
from tests.chat.probes import frames_before_probe
from tests.chat.tabs import Tab
from tests.chat.test_live_streaming import open_tab, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def every_query():
    """The SQL every connection of the process runs meanwhile, whatever its thread."""
    seen: list[str] = []
    original = utils.CursorWrapper._execute

    def spy(self, sql, params, *rest):
        seen.append(str(sql))
        return original(self, sql, params, *rest)

    with mock.patch.object(utils.CursorWrapper, "_execute", spy):
        yield seen


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
    with every_query() as sync_queries:  # the spy sees the socket's threads: it can fail
        bob_tab, bob_seen = await synced_tab(bob, alice_thread)
    assert sync_queries
    await until(alice_tab, alice_seen, lambda f: "bob" in presence_line(f))
    assert "alice" in presence_line(alice_seen.frames)
    await until(
        bob_tab, bob_seen, lambda f: "alice" in presence_line(f) and "bob" in presence_line(f)
    )

    # Typing reaches the others' tabs, not the typist's own; nothing is written — on any
    # connection of any thread (the sockets' database work runs on threads of their own).
    with every_query() as queries:
        await bob_tab.send_to(text_data=json.dumps({"type": "typing"}))
        await until(alice_tab, alice_seen, lambda f: any('data-name="bob"' in x for x in f))
    assert [sql for sql in queries if not sql.lstrip().upper().startswith("SELECT")] == []
    assert not any('data-name="bob"' in frame for frame in bob_seen.frames)

    await bob_tab.disconnect()
    # Gone at once: his tab said goodbye (a dead tab's entry lapses later, tested below).
    await until(alice_tab, alice_seen, lambda f: "bob" not in presence_line(f))
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


async def test_a_room_of_one_keeps_no_presence(alice, alice_thread, monkeypatch):
    from apps.chat.live import consumers

    monkeypatch.setattr(consumers, "SYNC_MIN_INTERVAL_SECONDS", 0)
    tab, seen = await synced_tab(alice, alice_thread)
    await tab.send_to(text_data=json.dumps({"type": "typing"}))
    # The socket takes its frames in order: once a sync sent after the typing is answered,
    # the typing has been handled, and a push it made comes before a probe sent now.
    await tab.send_to(text_data=json.dumps({"type": "sync", "after_seq": 0}))
    again = Tab()
    async with asyncio.timeout(10):
        while not again.synced:
            again.apply(await tab.receive_from(timeout=10))
    assert not any("typing" in frame for frame in again.frames)
    topic = events.thread_group(alice_thread.public_id)
    assert await frames_before_probe(tab, topic) == []
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
