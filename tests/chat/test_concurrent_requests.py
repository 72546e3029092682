"""Hot requests answer concurrently under ASGI: one slow composer POST does not hold others.

Through the real ASGI application (every middleware, the session and CSRF checks), two POSTs
are sent at once; the first is held inside its view until the second has been answered. On a
chain that runs views one at a time on Django's single thread for synchronous code, the
second could never be answered and the test would time out.
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import urlencode

import pytest
from channels.db import database_sync_to_async
from channels.testing import HttpCommunicator
from django.test import Client

from apps.chat.council import posting
from apps.chat.records.threads import thread_create
from config.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def logged_in_headers(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    client.get("/")  # a CSRF cookie
    cookies = "; ".join(f"{name}={morsel.value}" for name, morsel in client.cookies.items())
    return [
        (b"cookie", cookies.encode()),
        (b"x-csrftoken", client.cookies["csrftoken"].value.encode()),
        (b"hx-request", b"true"),
        (b"content-type", b"application/x-www-form-urlencoded"),
        (b"host", b"localhost"),
        (b"referer", b"http://localhost/"),
    ]


async def test_a_held_composer_post_does_not_hold_another(alice, alice_thread, monkeypatch):
    other = await database_sync_to_async(thread_create)(session=alice_thread.session)
    headers = await database_sync_to_async(logged_in_headers)(alice)
    second_answered = threading.Event()
    post = posting.message_post
    held = []

    def held_post(**kwargs):
        if not held:
            held.append(kwargs["thread"].pk)
            assert second_answered.wait(20), "the second POST waited for the first"
        return post(**kwargs)

    monkeypatch.setattr(posting, "message_post", held_post)

    async def send(thread, text):
        body = urlencode({"text": text}).encode()
        communicator = HttpCommunicator(
            application, "POST", f"/t/{thread.public_id}/messages/", body=body, headers=headers
        )
        return await communicator.get_response(timeout=30)

    first = asyncio.ensure_future(send(alice_thread, "held in the view"))
    while not held:
        await asyncio.sleep(0.01)
    second = await send(other, "answered meanwhile")
    second_answered.set()
    assert second["status"] == 200, second["body"][:300]
    assert (await first)["status"] == 200
