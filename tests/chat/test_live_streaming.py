"""The live path with real parts: Celery worker, Redis, channels-redis, the full ASGI stack."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from apps.chat import livebus, livestate
from apps.chat.council.posting import message_post
from apps.chat.display import events
from apps.chat.models import Message, MessageStatus
from apps.chat.records.sessions import session_create
from apps.chat.records.threads import thread_create, thread_rename
from config.asgi import application
from tests.chat.probes import frames_before_probe
from tests.chat.tabs import Tab

pytestmark = pytest.mark.django_db(transaction=True)


def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def open_tab(cookie: bytes | None, thread, *, after_seq: int = 0, pending=()):
    headers = [(b"origin", b"http://localhost")]
    if cookie:
        headers.append((b"cookie", cookie))
    communicator = WebsocketCommunicator(application, f"/ws/threads/{thread.public_id}/", headers)
    connected, _ = await communicator.connect(timeout=10)  # many tabs open at once in some tests
    assert connected
    await communicator.send_to(
        text_data=json.dumps({"type": "sync", "after_seq": after_seq, "pending": list(pending)})
    )
    return communicator


async def read_until(communicator, tab: Tab, done, timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not done():
            tab.apply(await communicator.receive_from(timeout=timeout))


async def post(thread, user, text):
    posted = await database_sync_to_async(message_post)(thread=thread, author=user, text=text)
    return posted.user_message, posted.replies[0]


async def stored(message) -> Message:
    return await Message.objects.aget(pk=message.pk)


async def test_deltas_arrive_in_order_and_the_stored_text_is_their_concatenation(
    alice, alice_thread, celery_worker, fast_demo
):
    # About a second of streaming at a 20 ms flush interval: many deltas even if the loop
    # stalls once (a cold worker compiles templates and opens connections on its first reply).
    fast_demo.PARLEY_DEMO_TOKENS_PER_SECOND = 200
    cookie = await database_sync_to_async(session_cookie)(alice)
    tab = Tab()
    communicator = await open_tab(cookie, alice_thread)
    await read_until(communicator, tab, lambda: tab.synced)
    _, reply = await post(alice_thread, alice, "Walk me through the **live path**")
    reply_id = str(reply.public_id)
    await read_until(communicator, tab, lambda: tab.status(reply_id) == "done")
    await communicator.disconnect()

    final = await stored(reply)
    assert final.status == MessageStatus.DONE
    assert len([1 for mid, _ in tab.deltas if mid == reply_id]) > 10
    assert tab.delta_text(reply_id) == final.text
    assert "live path" in final.text
    assert final.usage["output"] > 0 and final.ttft_ms is not None


async def test_two_sessions_of_one_person_stream_at_once_each_exact(
    alice, alice_thread, celery_worker, fast_demo
):
    """One person, two sessions, a reply streaming in each at the same time, a tab on each:
    each tab gets its own reply's text exactly, and nothing of the other's."""
    other = (await database_sync_to_async(session_create)(owner=alice, name="Second")).active_thread
    cookie = await database_sync_to_async(session_cookie)(alice)
    tabs = {}
    for thread in (alice_thread, other):
        tab = Tab()
        communicator = await open_tab(cookie, thread)
        await read_until(communicator, tab, lambda tab=tab: tab.synced)
        tabs[thread.pk] = (communicator, tab)
    replies = {}
    for thread in (alice_thread, other):
        _, replies[thread.pk] = await post(thread, alice, f"Walk me through thread {thread.pk}")
    for thread_pk, (communicator, tab) in tabs.items():
        reply_id = str(replies[thread_pk].public_id)
        await read_until(communicator, tab, lambda t=tab, r=reply_id: t.status(r) == "done")
    for thread_pk, (communicator, tab) in tabs.items():
        await communicator.disconnect()
        mine, theirs = (str(r.public_id) for r in sorted(
            replies.values(), key=lambda r: r.thread_id != thread_pk
        ))  # fmt: skip
        final = await stored(replies[thread_pk])
        assert tab.delta_text(mine) == final.text and final.status == MessageStatus.DONE
        assert theirs not in tab.bubbles and not tab.delta_text(theirs)


async def test_a_tab_joining_mid_stream_gets_the_snapshot_then_only_later_deltas(
    alice, alice_thread, celery_worker, slow_demo
):
    cookie = await database_sync_to_async(session_cookie)(alice)
    first_tab = Tab()
    first = await open_tab(cookie, alice_thread)
    _, reply = await post(alice_thread, alice, "Walk me through the **live path**")
    reply_id = str(reply.public_id)
    await read_until(first, first_tab, lambda: len(first_tab.deltas) >= 8)

    # A page loaded now renders both messages from the database and asks to catch up.
    late_tab = Tab()
    late = await open_tab(cookie, alice_thread, after_seq=reply.seq, pending=[reply_id])
    await read_until(late, late_tab, lambda: late_tab.snapshots)
    snapshot_text = late_tab.snapshots[0][1]
    assert snapshot_text, "the snapshot carries the text streamed so far"
    await read_until(late, late_tab, lambda: late_tab.status(reply_id) == "done")
    await read_until(first, first_tab, lambda: first_tab.status(reply_id) == "done")
    await late.disconnect()
    await first.disconnect()

    final = (await stored(reply)).text
    assert late_tab.delta_text(reply_id), "live deltas followed the snapshot"
    assert snapshot_text + late_tab.delta_text(reply_id) == final  # no gap, no repeat
    assert first_tab.delta_text(reply_id) == final  # two tabs, the same text


async def test_closing_every_tab_does_not_stop_the_reply_and_a_return_catches_up(
    alice, alice_thread, celery_worker, slow_demo
):
    # Slow enough that a checkpoint comes mid-stream on a loaded host (text goes out piece by
    # piece now, so three deltas come within the first tokens).
    slow_demo.PARLEY_DEMO_TOKENS_PER_SECOND = 30
    cookie = await database_sync_to_async(session_cookie)(alice)
    tab = Tab()
    communicator = await open_tab(cookie, alice_thread)
    _, reply = await post(alice_thread, alice, "Keep going without me")
    reply_id = str(reply.public_id)
    await read_until(communicator, tab, lambda: len(tab.deltas) >= 3)
    await communicator.disconnect()

    # Mid-stream the database comes to hold a checkpoint past what this tab saw.
    async with asyncio.timeout(10):
        while not len((checkpoint := await stored(reply)).text) > len(tab.delta_text(reply_id)):
            await asyncio.sleep(0.05)
    assert checkpoint.status == MessageStatus.STREAMING

    for _ in range(200):
        if (await stored(reply)).status == MessageStatus.DONE:
            break
        await asyncio.sleep(0.1)
    final = await stored(reply)
    assert final.status == MessageStatus.DONE
    assert checkpoint.text == final.text[: len(checkpoint.text)]

    # The returning tab still shows the reply as streaming; the catch-up settles it.
    returning = Tab()
    again = await open_tab(cookie, alice_thread, after_seq=reply.seq, pending=[reply_id])
    await read_until(again, returning, lambda: returning.status(reply_id) == "done")
    await again.disconnect()


async def test_a_lost_delta_is_repaired_from_the_live_tail(alice, alice_thread, settings):
    cookie = await database_sync_to_async(session_cookie)(alice)
    reply = await Message.objects.acreate(
        thread=alice_thread, seq=5, speaker="assistant", status=MessageStatus.STREAMING
    )
    reply_id = str(reply.public_id)
    redis = livestate.async_client()
    await livestate.live_reset(redis, reply_id)  # seq 1
    await livestate.live_append(redis, reply_id, "Hello ")  # seq 2
    await livestate.live_append(redis, reply_id, "world")  # seq 3

    tab = Tab()
    communicator = await open_tab(cookie, alice_thread, after_seq=5, pending=[reply_id])
    await read_until(communicator, tab, lambda: tab.snapshots)
    assert tab.snapshots[-1] == (reply_id, "Hello world")

    # Delta 4 is lost by the layer; delta 5 arrives: the tab is repaired, not corrupted.
    await livestate.live_append(redis, reply_id, ", again")
    await livestate.live_append(redis, reply_id, " and again")
    group = events.thread_group(alice_thread.public_id)

    async def publish_delta(seq: int, text: str) -> None:
        delta = {"type": "chat.delta", "message": reply_id, "seq": seq, "text": text}
        await livebus.publish(redis, [(group, delta)])

    await publish_delta(5, " and again")
    await read_until(communicator, tab, lambda: len(tab.snapshots) == 2)
    assert tab.bubbles[reply_id].text == "Hello world, again and again"
    # A stale delta (already in the snapshot) is dropped.
    await publish_delta(3, "world")
    assert await frames_before_probe(communicator, group) == []
    await communicator.disconnect()


async def test_an_idle_tab_keeps_its_socket_and_still_receives_events(alice, alice_thread):
    cookie = await database_sync_to_async(session_cookie)(alice)
    tab = Tab()
    communicator = await open_tab(cookie, alice_thread)
    await read_until(communicator, tab, lambda: tab.synced)
    # Idle for longer than the relay's blocking read and redis-py's default socket timeout
    # (the idling is what is tested); then the socket still answers.
    await asyncio.sleep(6.5)
    assert (
        await frames_before_probe(communicator, events.thread_group(alice_thread.public_id)) == []
    )
    await livebus.publish(
        livestate.async_client(),
        [
            (
                events.thread_group(alice_thread.public_id),
                {"type": "chat.append", "fragments": ["<p>still here</p>"], "messages": []},
            )
        ],
    )
    assert "still here" in await communicator.receive_from(timeout=3)
    await communicator.disconnect()


async def test_strangers_and_anonymous_visitors_get_a_closed_socket(alice_thread, bob):
    cookie = await database_sync_to_async(session_cookie)(bob)
    for who, expected_code in ((cookie, 4404), (None, 4401)):
        headers = [(b"origin", b"http://localhost")] + ([(b"cookie", who)] if who else [])
        communicator = WebsocketCommunicator(
            application, f"/ws/threads/{alice_thread.public_id}/", headers
        )
        connected, _ = await communicator.connect()
        assert connected  # accepted, then closed with a code browsers do not retry
        closing = await communicator.receive_output(timeout=2)
        assert closing == {"type": "websocket.close", "code": expected_code}
        await communicator.disconnect()


async def test_a_socket_for_an_unknown_thread_is_closed(alice):
    cookie = await database_sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(
        application,
        "/ws/threads/00000000-0000-0000-0000-000000000000/",
        [(b"origin", b"http://localhost"), (b"cookie", cookie)],
    )
    await communicator.connect()
    assert await communicator.receive_output(timeout=2) == {"type": "websocket.close", "code": 4404}
    await communicator.disconnect()


async def test_every_tab_on_the_session_sees_mutes_sticky_role_and_renames(
    alice, alice_thread, bob, celery_worker, fast_demo
):
    """Tabs on other threads of the session get the new role picker and summary strip, and
    only tabs on the thread its sticky role; another user's tab gets nothing."""
    other_thread = await database_sync_to_async(thread_create)(session=alice_thread.session)
    bob_session = await database_sync_to_async(session_create)(owner=bob, name="Bob's")
    alice_tab, bob_tab = Tab(), Tab()
    alice_socket = await open_tab(await database_sync_to_async(session_cookie)(alice), other_thread)
    bob_socket = await open_tab(
        await database_sync_to_async(session_cookie)(bob), bob_session.active_thread
    )
    for socket, tab in ((alice_socket, alice_tab), (bob_socket, bob_tab)):
        await read_until(socket, tab, lambda tab=tab: tab.synced)

    await database_sync_to_async(message_post)(
        thread=alice_thread, author=alice, text="/mute @sound_designer"
    )
    await read_until(alice_socket, alice_tab, lambda: 'id="role-picker"' in alice_tab.frames[-1])
    picker = alice_tab.frames[-1]
    assert re.search(r'class="chip chip--muted[^"]*" style="--accent: ', picker)
    assert re.search(r'chip--muted[^"]*"[^>]*data-handle="sound_designer"', picker)
    assert not re.search(r'chip--muted[^"]*"[^>]*data-handle="director"', picker)

    # The sticky role belongs to the thread: a tab on it is told; one on another thread not.
    same_tab = Tab()
    same_socket = await open_tab(await database_sync_to_async(session_cookie)(alice), alice_thread)
    await read_until(same_socket, same_tab, lambda: same_tab.synced)
    _, reply = await post(alice_thread, alice, "@visual_architect what do you see?")
    sticky = (
        'id="thread-status" class="thread-status" hx-swap-oob="true" data-sticky="visual_architect"'
    )
    await read_until(same_socket, same_tab, lambda: any(sticky in f for f in same_tab.frames))
    await same_socket.disconnect()
    # Once the reply has finished, the strip there counts its tokens.
    tokens = re.compile(r"<dt>Tokens in / out</dt><dd>(\d+) / (\d+)</dd>")
    await read_until(
        alice_socket,
        alice_tab,
        lambda: (found := tokens.search(alice_tab.frames[-1])) and found[2] != "0",
    )
    final = await stored(reply)
    assert tokens.search(alice_tab.frames[-1])[2] == str(final.usage["output"])
    assert not any("visual_architect" in f and "data-sticky" in f for f in alice_tab.frames)

    # A rename shows in the sidebar of the tab on the other thread (which has no such title).
    await database_sync_to_async(thread_rename)(thread=alice_thread, label="Harbour <b>at</b> dawn")
    # (The reply named the thread first: "what do you see?" gave no name of its own.)
    label_id = f'id="thread-label-{alice_thread.public_id}"'
    await read_until(
        alice_socket,
        alice_tab,
        lambda: label_id in alice_tab.frames[-1] and "Harbour &lt;b&gt;" in alice_tab.frames[-1],
    )
    assert "Harbour &lt;b&gt;at&lt;/b&gt; dawn" in alice_tab.frames[-1]
    assert f"thread-title-{alice_thread.public_id}" not in "".join(alice_tab.frames)

    # Nothing of Alice's reached Bob (handed out before the probe on his own topic).
    assert await frames_before_probe(bob_socket, events.user_group(bob.pk)) == []
    for socket in (alice_socket, bob_socket):
        await socket.disconnect()


async def test_a_frame_for_a_tab_that_has_just_closed_is_dropped_quietly(caplog):
    """daphne raises autobahn's Disconnected into a send that races the socket's closing
    (the tab left while its snapshot or a push was on its way): normal, not an error."""
    from autobahn.exception import Disconnected

    from apps.chat.live.consumers import ThreadConsumer

    async def closed_socket(message):
        raise Disconnected("Attempt to send on a closed protocol")

    consumer = ThreadConsumer()
    consumer.base_send = closed_socket
    with caplog.at_level("DEBUG", logger="apps.chat.live.consumers"):
        await consumer.send(text_data="<div>late</div>")
    assert [r.levelname for r in caplog.records] == ["DEBUG"]


def test_bubbles_announced_after_a_worker_claimed_a_reply_show_it_started(alice, alice_thread):
    """The announcer renders a turn's bubbles after the commit; a worker that claimed a reply
    meanwhile has already pushed its "streaming" state, to tabs that had no bubble to apply it
    to. The announced bubble shows the reply as it is then, not as it was posted."""
    posted = message_post(thread=alice_thread, author=alice, text="@assistant hello")
    reply = Message.objects.get(pk=posted.replies[0].pk)
    reply.status = MessageStatus.QUEUED  # the object the post announces from, as posted
    Message.objects.filter(pk=reply.pk).update(status=MessageStatus.STREAMING)  # claimed
    (fragment,) = events.bubble_fragments(events.with_current_status([reply]))
    assert 'data-status="streaming"' in fragment
