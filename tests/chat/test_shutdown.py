"""A stopping web process sends every tab on, including one that connects while it stops."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from apps.chat.live import shutdown
from config.asgi import application
from tests.chat.test_live_streaming import open_tab, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stopping_reset():
    yield
    shutdown.stopping.now = False


async def closed_with(communicator) -> int:
    """The code the server closed the socket with (frames before it are read and dropped)."""
    while True:
        output = await communicator.receive_output(timeout=5)
        if output["type"] == "websocket.close":
            return output["code"]


async def test_every_tab_and_a_late_one_are_asked_to_reconnect(alice, alice_thread, stopping_reset):
    cookie = await database_sync_to_async(session_cookie)(alice)
    tabs = [await open_tab(cookie, alice_thread) for _ in range(2)]
    for tab in tabs:  # synced: each consumer is in the process's open tabs
        while 'id="sync-state"' not in await tab.receive_from(timeout=10):
            pass
    closed = await shutdown.close_every_tab()
    assert closed == 2
    assert [await closed_with(tab) for tab in tabs] == [shutdown.CLOSE_RECONNECT] * 2
    # A tab reconnecting from another stopping process lands here meanwhile: sent on too.
    late = WebsocketCommunicator(
        application, f"/ws/threads/{alice_thread.public_id}/",
        [(b"origin", b"http://localhost"), (b"cookie", cookie)],
    )  # fmt: skip
    connected, _ = await late.connect(timeout=10)
    assert connected
    await late.send_to(text_data=json.dumps({"type": "sync", "after_seq": 0, "pending": []}))
    assert await closed_with(late) == shutdown.CLOSE_RECONNECT
    for communicator in [*tabs, late]:
        await communicator.disconnect()
