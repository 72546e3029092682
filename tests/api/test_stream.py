"""The API's live stream (issue 25): server-sent events from a real daphne, a snapshot then
numbered deltas; a client that drops the connection mid-reply and comes back with
Last-Event-ID misses nothing and gets nothing twice."""

from __future__ import annotations

import json

import httpx
import pytest

from apps.api.tokens import token_create
from apps.chat.council.posting import message_post
from tests.conftest import wait_settled

pytestmark = pytest.mark.django_db(transaction=True)


def events(lines, *, until):
    """Parse SSE frames from a response's lines until `until(kind, data)` is true."""
    kind, data, number = "message", [], None
    for line in lines:
        if line.startswith("id:"):
            number = int(line[3:].strip())
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "":
            if data:
                payload = json.loads("\n".join(data))
                yield kind, payload, number
                if until(kind, payload):
                    return
            kind, data = "message", []


class Reader:
    """What an API client keeps of one reply: its text and the number of its last delta."""

    def __init__(self, reply_id: str) -> None:
        self.reply_id, self.text, self.last, self.deltas = reply_id, "", 0, 0
        self.done: dict | None = None

    def take(self, kind: str, data: dict) -> None:
        if kind == "snapshot":  # a fresh start (a new topic's first push reads as a gap)
            for message in data["messages"]:
                self.take(
                    "message",
                    {
                        **message,
                        **(
                            {"live": data["live"][message["id"]]}
                            if message["id"] in data["live"]
                            else {}
                        ),
                    },
                )
            return
        if kind == "message" and data["id"] == self.reply_id:
            if "live" in data:  # in flight: its text so far, and the delta that ends it
                self.text, self.last = data["live"]["text"], data["live"]["seq"]
            elif data["status"] == "done":
                self.done = data
        elif kind == "delta" and data["message"] == self.reply_id:
            assert data["seq"] == self.last + 1, (data["seq"], self.last)  # no gap, no repeat
            self.text += data["text"]
            self.last, self.deltas = data["seq"], self.deltas + 1


def test_a_reply_streams_and_a_reconnect_resumes_without_gap_or_repeat(
    alice, alice_thread, asgi_server, slow_demo
):
    raw = token_create(user=alice, name="sse", scope="read")[1]
    headers = {"Authorization": f"Bearer {raw}"}
    url = f"{asgi_server.url}/api/v1/threads/{alice_thread.public_id}/events"
    with httpx.Client(timeout=20) as client:
        with client.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            kind, snapshot, last_id = next(events(lines, until=lambda k, d: k == "snapshot"))
            assert kind == "snapshot" and snapshot["messages"] == []
            posted = message_post(thread=alice_thread, author=alice, text="@assistant a story")
            reader = Reader(str(posted.replies[0].public_id))
            for kind, data, number in events(lines, until=lambda k, d: reader.deltas >= 6):
                last_id = number
                reader.take(kind, data)
        before = reader.deltas
        # The connection dropped mid-reply; come back where it stopped.
        resumed = {**headers, "Last-Event-ID": str(last_id)}
        with client.stream("GET", url, headers=resumed) as again:
            for kind, data, _number in events(
                again.iter_lines(), until=lambda k, d: reader.done is not None
            ):
                assert kind != "snapshot"  # the bus still held everything: no fresh snapshot
                reader.take(kind, data)
    (settled,) = wait_settled(posted.replies)
    assert reader.deltas > before  # the reply went on streaming after the reconnect
    assert reader.done is not None and reader.text == settled.text == reader.done["text"]


def test_a_client_too_far_behind_gets_a_fresh_snapshot(alice, alice_thread, asgi_server):
    raw = token_create(user=alice, name="sse", scope="read")[1]
    url = f"{asgi_server.url}/api/v1/threads/{alice_thread.public_id}/events"
    with (
        httpx.Client(timeout=20) as client,
        client.stream(
            "GET", url, headers={"Authorization": f"Bearer {raw}", "Last-Event-ID": "999999999"}
        ) as response,
    ):
        kind, data, _ = next(events(response.iter_lines(), until=lambda k, d: True))
    assert kind == "snapshot" and "messages" in data


def test_the_stream_needs_a_token(alice_thread, asgi_server):
    url = f"{asgi_server.url}/api/v1/threads/{alice_thread.public_id}/events"
    assert httpx.get(url, timeout=10).status_code == 401


def test_a_client_back_after_the_bus_lost_its_events_still_gets_the_replys_end(
    alice, alice_thread, asgi_server, slow_demo
):
    """A client that drops mid-reply and comes back once the bus no longer holds what it
    missed (here: the topic's entries gone, as after a trim) gets a fresh snapshot — and that
    snapshot carries the reply that settled meanwhile, done, with its whole text."""
    from apps.chat import livebus
    from apps.chat.display import events as display_events
    from apps.chat.livestate import shared_sync_client

    raw = token_create(user=alice, name="sse", scope="read")[1]
    headers = {"Authorization": f"Bearer {raw}"}
    url = f"{asgi_server.url}/api/v1/threads/{alice_thread.public_id}/events"
    with httpx.Client(timeout=20) as client:
        with client.stream("GET", url, headers=headers) as response:
            lines = response.iter_lines()
            _, _, last_id = next(events(lines, until=lambda k, d: k == "snapshot"))
            posted = message_post(thread=alice_thread, author=alice, text="@assistant a story")
            reader = Reader(str(posted.replies[0].public_id))
            for kind, data, number in events(lines, until=lambda k, d: reader.deltas >= 3):
                last_id = number
                reader.take(kind, data)
        (settled,) = wait_settled(posted.replies)
        topic = display_events.thread_group(alice_thread.public_id)
        shared_sync_client().delete(livebus.stream_key(topic))  # what it missed is gone
        back = {**headers, "Last-Event-ID": str(last_id)}
        with client.stream("GET", url, headers=back) as again:
            kind, snapshot, _ = next(events(again.iter_lines(), until=lambda k, d: True))
    assert kind == "snapshot"
    (mine,) = [m for m in snapshot["messages"] if m["id"] == reader.reply_id]
    assert mine["status"] == "done" and mine["text"] == settled.text


def test_the_streamed_text_adds_up_to_the_stored_reply_exactly(
    alice, anthropic_thread, asgi_server, emulator
):
    """The model ends with blanks the stored reply drops: the deltas never carry them, so a
    client that only adds deltas holds exactly the stored text."""
    from apps.providers.emulator import Script

    said = "The harbour at dawn, then the gulls. " * 3  # over a second: several deltas
    emulator.script(Script(text=said + " \n\n ", tokens_per_second=25))
    raw = token_create(user=alice, name="sse", scope="read")[1]
    url = f"{asgi_server.url}/api/v1/threads/{anthropic_thread.public_id}/events"
    with (
        httpx.Client(timeout=20) as client,
        client.stream("GET", url, headers={"Authorization": f"Bearer {raw}"}) as response,
    ):
        lines = response.iter_lines()
        next(events(lines, until=lambda k, d: k == "snapshot"))
        posted = message_post(thread=anthropic_thread, author=alice, text="@assistant go")
        reader = Reader(str(posted.replies[0].public_id))
        for kind, data, _ in events(lines, until=lambda k, d: reader.done is not None):
            reader.take(kind, data)
    (settled,) = wait_settled(posted.replies)
    assert settled.text == said.rstrip()
    assert reader.deltas > 1 and reader.text == settled.text


@pytest.mark.slow
def test_an_idle_stream_stays_open_with_keep_alives_and_rechecks_access_at_each(
    alice, alice_thread, asgi_server
):
    """Nothing happens for 30 s: the stream sends a keep-alive at least every 15 s and stays
    open. Then the person's account is disabled without any push announcing it: the next
    keep-alive's access check ends the stream."""
    import time

    from django.contrib.auth import get_user_model

    raw = token_create(user=alice, name="idle", scope="read")[1]
    url = f"{asgi_server.url}/api/v1/threads/{alice_thread.public_id}/events"
    seen: list[tuple[float, str]] = []
    headers = {"Authorization": f"Bearer {raw}"}
    with (
        httpx.Client(timeout=httpx.Timeout(25, connect=10)) as client,
        client.stream("GET", url, headers=headers) as response,
    ):
        assert response.status_code == 200
        start = time.monotonic()
        lines = response.iter_lines()
        for line in lines:
            seen.append((time.monotonic() - start, line))
            if line == ": keep-alive" and time.monotonic() - start >= 30:
                break
        alive = [at for at, line in seen if line == ": keep-alive"]
        assert len(alive) >= 2, seen
        gaps = [b - a for a, b in zip([0.0, *alive], alive, strict=False)]
        assert max(gaps) <= 16, gaps
        get_user_model().objects.filter(pk=alice.pk).update(is_active=False)  # no push
        rest = list(events(lines, until=lambda kind, data: kind == "end"))
    assert rest and rest[-1][0] == "end", rest
