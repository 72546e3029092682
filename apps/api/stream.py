"""A thread's live events as server-sent events, from the same numbered live bus the tabs
read: a snapshot of the replies in flight, then every change numbered (`id:`), so a client
that reconnects with `Last-Event-ID` goes on exactly where it stopped — no gap, no repeat.
When the bus no longer holds what it missed, it gets a fresh snapshot instead.

Events (`data:` is JSON):
- `snapshot`: `{"messages": [...], "live": {id: {"text", "seq"}}}` — the replies in flight,
  each with the text streamed so far and the number of its last delta;
- `delta`: `{"message", "seq", "text"}` — the next piece of a streaming reply's text
  (`seq` counts per reply, gap-free);
- `message`: a message as `GET /threads/{id}/messages` gives it, whenever one is added or
  changes state (queued → streaming → done); for a reply in flight, with its `live` text;
- comments (`: keep-alive`) every 15 s.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import StreamingHttpResponse
from ninja import Router

from apps.api.schemas import Error
from apps.chat import livebus, livestate
from apps.chat.access import Need, reach, visible_to
from apps.chat.display import events
from apps.chat.models import IN_FLIGHT, Message, Thread
from apps.chat.selectors import threads_for_user

router = Router()
KEEP_ALIVE_MS = 15_000
RESUMED = -1  # a reply's deltas continue from wherever the resumed client was


def _frame(kind: str, data: Any, number: int | None = None) -> str:
    head = f"id: {number}\n" if number is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, default=str)}\n\n"


class ThreadStream:
    """One client's view of a thread's events: what it may see, and each reply's last delta."""

    def __init__(self, *, thread: Thread, user) -> None:
        self.thread, self.user = thread, user
        self.topic = events.thread_group(thread.public_id)
        self.seen: dict[str, int] = {}  # message id -> the last delta number sent

    def _messages(self, ids: list[str] | None) -> list[Message]:
        rows = Message.objects.filter(thread=self.thread).filter(visible_to(self.user))
        rows = (
            rows.filter(public_id__in=ids) if ids is not None else rows.filter(status__in=IN_FLIGHT)
        )
        return list(rows.select_related("author").order_by("seq"))

    async def messages(self, ids: list[str] | None, redis) -> list[dict]:
        """The messages (None: those in flight) as JSON, each live one with its text so far."""
        from apps.api.endpoints import messages_out

        rows = await sync_to_async(self._messages)(ids)
        out = await sync_to_async(messages_out)(rows)
        payloads = []
        for row, item in zip(rows, out, strict=True):
            payload = item.model_dump(mode="json")
            message_id = str(row.public_id)
            if row.in_flight:
                live = await livestate.live_snapshot(redis, message_id)
                payload["live"] = {"text": live.text if live else row.text,
                                   "seq": live.seq if live else 0}  # fmt: skip
                self.seen[message_id] = live.seq if live else 0
            else:
                self.seen[message_id] = events.SETTLED_SEQ
            payloads.append(payload)
        return payloads

    async def snapshot(self, redis) -> tuple[int, str]:
        head = (await livebus.heads(redis, [self.topic]))[self.topic]
        self.seen = {}
        messages = await self.messages(None, redis)
        live = {m["id"]: m.pop("live") for m in messages if "live" in m}
        return head, _frame("snapshot", {"messages": messages, "live": live}, head)

    async def frames_of(self, number: int, event: dict[str, Any], redis) -> list[str]:
        audience = event.get("audience")
        if audience is not None and self.user.pk not in audience:
            return [f"id: {number}\n: not for you\n\n"]
        kind = event.get("type")
        if kind == "chat.delta":
            message_id, seq = event["message"], event["seq"]
            last = self.seen.get(message_id)
            if last is None or (seq <= last and last != RESUMED):
                return [f"id: {number}\n: -\n\n"]
            if seq == last + 1 or last == RESUMED:
                self.seen[message_id] = seq
                return [_frame("delta", {"message": message_id, "seq": seq,
                                         "text": event["text"]}, number)]  # fmt: skip
            # A delta went missing on the way: the reply as it is now instead.
            return [_frame("message", m, number) for m in await self.messages([message_id], redis)]
        ids = event.get("messages") or ([event["message"]] if "message" in event else [])
        if kind in ("chat.append", "chat.state") and ids:
            return [_frame("message", m, number) for m in await self.messages(ids, redis)]
        return [f"id: {number}\n: {kind}\n\n"]

    async def run(self, last_event_id: int | None) -> AsyncIterator[str]:
        redis = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
        try:
            if last_event_id is not None and await self._can_resume(redis, last_event_id):
                number, first = last_event_id, "retry: 1000\n\n"
            else:
                number, first = await self.snapshot(redis)
            yield first
            while True:
                pushes = await livebus.read(redis, {self.topic: number}, block_ms=KEEP_ALIVE_MS)
                if not pushes:
                    yield ": keep-alive\n\n"
                    continue
                for _, pushed, event in pushes:
                    if pushed != number + 1:  # the bus dropped what this stream missed
                        number, frame = await self.snapshot(redis)
                        yield frame
                        break
                    number = pushed
                    for frame in await self.frames_of(pushed, event, redis):
                        yield frame
        finally:
            await redis.aclose()

    async def _can_resume(self, redis, after: int) -> bool:
        """Whether the bus still holds every event after `after`; then the replies in flight
        take their next delta whatever its number (the client has the ones before)."""
        head = (await livebus.heads(redis, [self.topic]))[self.topic]
        if not 0 < after <= head:
            return False
        if after < head:
            missed = await livebus.read(redis, {self.topic: after}, block_ms=1)
            if not missed or missed[0][1] != after + 1:
                return False
        in_flight = await sync_to_async(
            lambda: [str(m.public_id) for m in self._messages(None)]
        )()  # fmt: skip
        self.seen = dict.fromkeys(in_flight, RESUMED)
        return True


@router.get(
    "/threads/{thread_id}/events",
    response={200: None, 401: Error, 404: Error},
    summary="A thread's live events (server-sent events)",
    description=__doc__,
)
async def thread_events(request, thread_id: UUID):
    thread = await sync_to_async(reach)(
        threads_for_user, user=request.user, need=Need.READ, public_id=thread_id
    )
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or ""
    last = int(raw) if raw.isdigit() else None
    stream = ThreadStream(thread=thread, user=request.user)
    response = StreamingHttpResponse(stream.run(last), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
