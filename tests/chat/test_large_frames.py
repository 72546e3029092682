"""Replies and syncs too large for one websocket frame, and the first delta going out at once."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from apps.chat.display.frames import MAX_FRAME_BYTES
from apps.providers.emulator import Script
from tests.chat.tabs import Tab
from tests.chat.test_live_streaming import open_tab, post, read_until, session_cookie, stored

pytestmark = pytest.mark.django_db(transaction=True)

DAPHNE_FRAME_LIMIT = 1024 * 1024
# ~1.3 MB, with characters that grow when escaped and some that take several bytes.
BIG_REPLY = "".join(f'Line {n}: <b>bold?</b> & "quoted" — naïve café\n' for n in range(28_000))


def frame_sizes(tab: Tab) -> list[int]:
    return [len(frame.encode()) for frame in tab.frames]


def fetched_bubble(user, message) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/m/{message.public_id}/")
    assert response.status_code == 200
    return response.content.decode()


async def test_a_reply_over_a_mebibyte_reaches_an_open_and_a_reloading_tab_intact(
    alice, bob, anthropic_thread, celery_worker, emulator
):
    assert len(BIG_REPLY.encode()) > 1.2 * DAPHNE_FRAME_LIMIT
    emulator.script(
        Script(text=BIG_REPLY, chunk_chars=20_000, tokens_per_second=15, provider="anthropic")
    )
    cookie = await database_sync_to_async(session_cookie)(alice)
    open_tab_ = Tab()
    first = await open_tab(cookie, anthropic_thread)
    await read_until(first, open_tab_, lambda: open_tab_.synced)
    _, reply = await post(anthropic_thread, alice, "Print the long table, please.")
    reply_id = str(reply.public_id)

    # A tab that reloads mid-stream, once more text is live than one frame can hold.
    await read_until(first, open_tab_, lambda: len(open_tab_.delta_text(reply_id)) > 700_000)
    joining = Tab()
    late = await open_tab(cookie, anthropic_thread, after_seq=reply.seq, pending=[reply_id])
    await read_until(late, joining, lambda: joining.snapshots)
    await read_until(late, joining, lambda: joining.status(reply_id) == "done", timeout=60)
    await read_until(first, open_tab_, lambda: open_tab_.status(reply_id) == "done", timeout=60)
    await late.disconnect()
    await first.disconnect()

    final = await stored(reply)
    assert final.text == BIG_REPLY.rstrip()
    # Every delta, in order, no repeat (the stored reply drops the trailing newline).
    assert open_tab_.delta_text(reply_id).rstrip() == final.text
    snapshot = joining.snapshots[0][1]
    assert len(snapshot.encode()) < MAX_FRAME_BYTES < len(final.text)
    assert (snapshot + joining.delta_text(reply_id)).rstrip() == final.text  # no gap
    for tab in (open_tab_, joining):
        assert max(frame_sizes(tab)) <= MAX_FRAME_BYTES + 1024 < DAPHNE_FRAME_LIMIT

    # Settled, the bubble is too large for a frame: the tab fetches it over HTTP.
    stub = f'hx-get="/m/{reply_id}/"'
    assert stub in open_tab_.frames[-1] or any(stub in frame for frame in open_tab_.frames[-3:])
    html = await database_sync_to_async(fetched_bubble)(alice, final)
    assert "Line 27999" in html and "&lt;b&gt;bold?&lt;/b&gt;" in html and "<b>bold" not in html
    client = Client()
    await database_sync_to_async(client.force_login)(bob)
    assert (await database_sync_to_async(client.get)(f"/m/{reply_id}/")).status_code == 404

    # A tab opened afterwards, syncing from nothing, gets the stub in small frames too.
    cold = Tab()
    fresh = await open_tab(cookie, anthropic_thread)
    await read_until(fresh, cold, lambda: cold.synced)
    await fresh.disconnect()
    assert cold.status(reply_id) == "done"
    assert any(stub in frame for frame in cold.frames)
    assert max(frame_sizes(cold)) <= MAX_FRAME_BYTES + 1024


async def test_with_time_to_spare_each_piece_goes_out_as_it_arrives(
    alice, anthropic_thread, celery_worker, emulator, settings, monkeypatch
):
    """One stream on an idle worker: no batching, even under a long ceiling. (The loop's
    lag, the other signal, is held at none: the suite's own load would show there.)"""
    from apps.chat.live.pacing import Pacer

    monkeypatch.setattr(Pacer, "observe_lag", lambda pacer, seconds: pacer.forget())
    settings.PARLEY_FLUSH_INTERVAL_MS = 60_000
    emulator.script(
        Script(text="First. " + "then more " * 30, tokens_per_second=40, provider="anthropic")
    )
    cookie = await database_sync_to_async(session_cookie)(alice)
    tab = Tab()
    communicator = await open_tab(cookie, anthropic_thread)
    await read_until(communicator, tab, lambda: tab.synced)
    _, reply = await post(anthropic_thread, alice, "hello")
    reply_id = str(reply.public_id)
    await read_until(communicator, tab, lambda: tab.status(reply_id) == "done")
    await communicator.disconnect()

    final = await stored(reply)
    deltas = [text for message_id, text in tab.deltas if message_id == reply_id]
    # Piece by piece: not one batch at the end, as a 60 s tick would have sent. (The first
    # pieces may reach the tab inside a snapshot instead, when they outrun the announcement
    # of the reply's bubble: the deltas then carry the rest.)
    chunks = len(final.text) / 4  # the emulator's default chunk
    assert len(deltas) >= chunks / 2, deltas
    assert final.text.endswith("".join(deltas).rstrip())


def test_a_first_text_errand_that_runs_late_publishes_the_first_text_alone(alice, alice_thread):
    """On a busy loop the first-text errand and the errand that releases the stage's siblings
    both run after more text arrived: the first text still goes out alone, the rest waits for
    the tick (it used to go out as a second delta at once)."""
    from apps.chat import livestate
    from apps.chat.live.hub import StreamHub
    from apps.chat.live.publisher import LiveReply
    from tests.chat.test_orchestration import stalled_reply

    hub = StreamHub()
    hub.pacer.lag = 1.0  # a loop far behind: the tick is at its ceiling
    live = LiveReply(message=stalled_reply(alice_thread, alice), lease="test")

    async def a_busy_start() -> None:
        await livestate.live_reset(hub.redis, live.message_id)
        released = hub.loop.create_task(hub.flush_first(live))  # the engine's, on the first event
        live.add("Firs")
        hub.text_arrived(live, first=live.text == "Firs")
        await asyncio.sleep(0)  # both errands start; the first takes the lock and publishes
        live.add("t.")  # arrives while the loop is busy with them
        await asyncio.gather(released, *hub._errands)

    try:
        hub.loop.run_until_complete(a_busy_start())
    finally:
        hub.loop.close()
    assert live.published == len("Firs")  # one delta, "Firs"; "t." waits for the tick
    assert live.unpublished == "t."


def test_text_goes_out_once_a_tick_on_the_chunk_that_finds_it_due_or_on_a_timer(
    alice, alice_thread, settings
):
    """Under load, chunks every 10 ms go out once a tick, not once a chunk; the chunk that
    finds the tick due publishes in its own turn of the loop (no timer to wait for); text
    that no chunk follows still goes out, on a timer a little after the tick."""
    import time

    from apps.chat import livestate
    from apps.chat.live.hub import StreamHub
    from apps.chat.live.publisher import LiveReply
    from tests.chat.test_orchestration import stalled_reply

    settings.PARLEY_FLUSH_INTERVAL_MS = 100
    hub = StreamHub()
    hub.pacer.lag = 1.0  # a loaded process: the tick is at its ceiling, 100 ms
    live = LiveReply(message=stalled_reply(alice_thread, alice), lease="test")
    hub.replies[live.message_id] = live
    seen: dict[str, object] = {}

    def arrive(text: str) -> None:
        hub.text_arrived(live, first=live.add(text))

    async def stream() -> None:
        await livestate.live_reset(hub.redis, live.message_id)
        arrive("First")
        started = time.monotonic()
        for n in range(50):  # half a second of chunks, 10 ms apart
            await asyncio.sleep(0.01)
            arrive(f" w{n}")
        seen["chunks"] = (live.seq, time.monotonic() - started)
        # Let the last chunks go out on their timer (late on a loaded machine), then wait out
        # a tick from that batch: the next chunk is due on arrival.
        while live.unpublished or hub._late_text is not None or hub._errands:
            await asyncio.sleep(0.01)
        await asyncio.sleep(max(0.0, hub._next_batch - time.monotonic()) + 0.02)
        arrive(" due")
        # The batch is on its way from this chunk's own turn of the loop, with no timer.
        seen["batching"] = hub._batching and hub._late_text is None
        await asyncio.gather(*hub._errands)
        seen["due"] = live.unpublished
        arrive(" alone")  # within the tick of the batch just sent, and nothing follows it
        seen["waiting"] = live.unpublished
        # The timer sends it a tick and a half after that batch (later on a loaded machine).
        give_up = time.monotonic() + 3
        while live.unpublished and time.monotonic() < give_up:
            await asyncio.sleep(0.01)
        seen["late"] = live.unpublished
        await asyncio.gather(*hub._errands)

    try:
        hub.loop.run_until_complete(stream())
    finally:
        hub.loop.close()
    # The first text alone, then one publish per 100 ms tick over the chunks (a loaded
    # machine stretches their half second), not one per chunk.
    deltas, took = seen["chunks"]
    assert 3 <= deltas <= 2 + took / 0.1, seen["chunks"]
    assert seen["batching"] is True
    assert seen["due"] == ""
    assert seen["waiting"] == " alone"
    assert seen["late"] == ""
    assert live.published == len(live.text)
