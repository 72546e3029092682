"""A thread's live events as server-sent events, from the same numbered live bus the tabs
read: a snapshot of the replies in flight, then every change numbered (`id:`), so a client
that reconnects with `Last-Event-ID` goes on exactly where it stopped — no gap, no repeat.
When the bus no longer holds what it missed, it gets a fresh snapshot instead.

Events (`data:` is JSON):
- `snapshot`: `{"messages": [...], "live": {id: {"text", "seq"}}}` — the replies in flight,
  each with the text streamed so far and the number of its last delta, and the thread's
  latest messages as they are now (a client that missed a reply's end finds it here);
- `delta`: `{"message", "seq", "text"}` — the next piece of a streaming reply's text
  (`seq` counts per reply, gap-free);
- `message`: a message as `GET /threads/{id}/messages` gives it, whenever one is added or
  changes state (queued → streaming → done); for a reply in flight, with its `live` text;
- `end`: `{"reason"}` — the stream ends because its person may no longer read the thread
  (taken out of the room, left it) or its token was revoked; do not reconnect;
- comments (`: keep-alive`) every 15 s.

A stream holds no database connection while it waits: each read gives its connection back
to the pool at once, so open streams never starve the pages and calls of their process.
Streams open at once are capped per token and per person (`PARLEY_API_STREAMS_PER_TOKEN`,
`PARLEY_API_STREAMS_PER_USER`): one more answers 429.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar
from uuid import UUID

import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http import StreamingHttpResponse
from ninja import Router
from ninja.errors import HttpError
from redis.exceptions import RedisError

from apps.api import limits
from apps.api.models import AccessToken
from apps.api.schemas import Error
from apps.chat import livebus, livestate
from apps.chat.access import Need, reach, visible_to
from apps.chat.display import events
from apps.chat.models import IN_FLIGHT, Message, Thread
from apps.chat.selectors import threads_for_user

logger = logging.getLogger(__name__)
router = Router()
KEEP_ALIVE_MS = 15_000
RESUMED = -1  # a reply's deltas continue from wherever the resumed client was
RECENT = 20  # settled messages a snapshot carries besides the replies in flight
T = TypeVar("T")


def _call_and_release(function: Callable[..., T], *args: Any) -> T:
    try:
        return function(*args)
    finally:
        # Back to the pool before the stream waits again (minutes, maybe). A connection in
        # a transaction is not ours to close (a test's).
        for connection in connections.all(initialized_only=True):
            if not connection.in_atomic_block:
                connection.close()


async def released(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` on the request's thread, its database connection given back after."""
    return await sync_to_async(_call_and_release)(function, *args)


def _frame(kind: str, data: Any, number: int | None = None) -> str:
    head = f"id: {number}\n" if number is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, default=str)}\n\n"


class AccessEnded(Exception):
    """The stream's person may no longer read its thread, or its token was revoked."""


class ThreadStream:
    """One client's view of a thread's events: what it may see, and each reply's last delta."""

    def __init__(self, *, thread: Thread, user, token: AccessToken, place: str) -> None:
        self.thread, self.user, self.token, self.place = thread, user, token, place
        self.topic = events.thread_group(thread.public_id)
        self.own_topic = events.user_group(user.pk)
        self.seen: dict[str, int] = {}  # message id -> the last delta number sent

    def _allowed(self) -> bool:
        token_active = AccessToken.objects.filter(
            pk=self.token.pk, revoked_at=None, user__is_active=True
        ).exists()
        return token_active and (
            threads_for_user(user=self.user, need=Need.READ).filter(pk=self.thread.pk).exists()
        )

    async def check_access(self) -> None:
        if not await released(self._allowed):
            raise AccessEnded

    def _messages(self, ids: list[str] | None) -> list[Message]:
        rows = Message.objects.filter(thread=self.thread).filter(visible_to(self.user))
        if ids is not None:
            return list(rows.filter(public_id__in=ids).select_related("author").order_by("seq"))
        recent = list(rows.order_by("-seq").values_list("pk", flat=True)[:RECENT])
        rows = rows.filter(status__in=IN_FLIGHT) | rows.filter(pk__in=recent)
        return list(rows.select_related("author").order_by("seq"))

    def _messages_out(self, ids: list[str] | None) -> tuple[list[Message], list[dict]]:
        from apps.api.endpoints import messages_out

        rows = self._messages(ids)
        return rows, [
            item.model_dump(mode="json") for item in messages_out(rows, session=self.thread.session)
        ]

    async def messages(self, ids: list[str] | None, redis) -> list[dict]:
        """The messages (None: those in flight and the latest) as JSON, each live one with
        its text so far."""
        rows, payloads = await released(self._messages_out, ids)
        for row, payload in zip(rows, payloads, strict=True):
            message_id = str(row.public_id)
            if row.in_flight:
                live = await livestate.live_snapshot(redis, message_id)
                payload["live"] = {"text": live.text if live else row.text,
                                   "seq": live.seq if live else 0}  # fmt: skip
                self.seen[message_id] = live.seq if live else 0
            else:
                self.seen[message_id] = events.SETTLED_SEQ
        return payloads

    async def snapshot(self, redis) -> tuple[int, str]:
        await self.check_access()
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

    async def _own_event(self, event: dict[str, Any]) -> None:
        """A push on the person's own topic: a change of their room or their tokens."""
        kind = event.get("type")
        if kind == "account.ended" or (
            kind == "token.revoked" and event.get("token") == self.token.pk
        ):
            raise AccessEnded
        if kind in ("room.left", "room.changed", "token.revoked"):
            await self.check_access()

    async def run(self, redis, last_event_id: int | None) -> AsyncIterator[str]:
        try:
            async for frame in self._frames(redis, last_event_id):
                yield frame
        except AccessEnded:
            yield _frame("end", {"reason": "You may no longer read this thread."})
        except RedisError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # The client left mid-read: redis-py reports the cancellation as a timeout.
                raise asyncio.CancelledError from None
            logger.warning("A live stream lost Redis (%s); the client will reconnect", exc)
        finally:
            await redis.aclose()
            await self._give_place_back()

    async def _frames(self, redis, last_event_id: int | None) -> AsyncIterator[str]:
        # Follow the person's topic from now: access is checked just below, so a change
        # after the check arrives as a push.
        own = (await livebus.heads(redis, [self.own_topic]))[self.own_topic]
        if last_event_id is not None and await self._can_resume(redis, last_event_id):
            number, first = last_event_id, "retry: 1000\n\n"
        else:
            number, first = await self.snapshot(redis)
        yield first
        while True:
            after = {self.topic: number, self.own_topic: own}
            pushes = await livebus.read(redis, after, block_ms=KEEP_ALIVE_MS)
            if not pushes:
                await self.check_access()  # also what no push announces (an account disabled)
                await self.keep_place(redis)
                yield ": keep-alive\n\n"
                continue
            for topic, pushed, event in pushes:
                if topic == self.own_topic:
                    own = pushed
                    await self._own_event(event)
                    continue
                if pushed != number + 1:  # the bus dropped what this stream missed
                    number, frame = await self.snapshot(redis)
                    yield frame
                    break
                number = pushed
                for frame in await self.frames_of(pushed, event, redis):
                    yield frame

    async def keep_place(self, redis) -> None:
        """Refresh this stream's place among its token's and person's open streams."""
        await limits.stream_refresh(redis, self.place, token_id=self.token.pk, user_id=self.user.pk)

    async def _give_place_back(self) -> None:
        # On a connection of its own: the stream's may have been cut mid-read.
        closer = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
        try:
            await limits.stream_close(
                closer, self.place, token_id=self.token.pk, user_id=self.user.pk
            )
        finally:
            await closer.aclose()

    async def _can_resume(self, redis, after: int) -> bool:
        """Whether the bus still holds every event after `after`; then the replies in flight
        take their next delta whatever its number (the client has the ones before)."""
        await self.check_access()
        head = (await livebus.heads(redis, [self.topic]))[self.topic]
        if not 0 < after <= head:
            return False
        if after < head:
            missed = await livebus.read(redis, {self.topic: after}, block_ms=None)
            if not missed or missed[0][1] != after + 1:
                return False
        self.seen = dict.fromkeys(await released(self._in_flight_ids), RESUMED)
        return True

    def _in_flight_ids(self) -> list[str]:
        rows = Message.objects.filter(thread=self.thread, status__in=IN_FLIGHT)
        return [
            str(pk) for pk in rows.filter(visible_to(self.user)).values_list("public_id", flat=True)
        ]


def last_event_number(request) -> int | None:
    """`Last-Event-ID` (or `?after=`) when it is a plain number; anything else starts fresh."""
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or ""
    raw = raw.strip()
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None


@router.get(
    "/threads/{thread_id}/events",
    response={200: None, 400: Error, 401: Error, 404: Error, 429: Error},
    summary="A thread's live events (server-sent events)",
    description=__doc__,
)
async def thread_events(request, thread_id: UUID):
    thread = await released(
        lambda: reach(threads_for_user, user=request.user, need=Need.READ, public_id=thread_id)
    )
    # Its reads block up to KEEP_ALIVE_MS: the socket must wait longer than that (redis-py's
    # default of 5 s cut every idle stream, before its keep-alive and access check).
    redis = aioredis.Redis.from_url(
        settings.REDIS_URL, decode_responses=True, socket_timeout=KEEP_ALIVE_MS / 1000 + 10
    )
    try:
        place = await limits.stream_open(redis, token_id=request.auth.pk, user_id=request.user.pk)
    except limits.TooManyStreams as exc:
        await redis.aclose()
        raise HttpError(429, exc.detail) from None
    stream = ThreadStream(place=place, thread=thread, user=request.user, token=request.auth)
    response = StreamingHttpResponse(
        stream.run(redis, last_event_number(request)), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
