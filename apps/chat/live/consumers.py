"""The websockets of open tabs: forward pre-rendered HTML, write nothing.

A tab on a thread has one socket (`ThreadConsumer`): the thread's, its session's and its
owner's groups. Any other page of a signed-in person (the sessions list) has the owner's
group only (`UserConsumer`): finished turns and the sessions' unread badges.

Thread protocol: after connecting, the page sends {"type": "sync", "after_seq": N, "pending": [ids]}
(the last sequence number it shows and the replies it shows as unfinished). The consumer then
joins the thread's group, sends what the tab lacks — newer bubbles appended, unfinished ones
replaced with their live text — and forwards events, dropping any delta the snapshot already
contained and repairing a gap with a fresh snapshot.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from redis.exceptions import RedisError

from apps.chat import livestate
from apps.chat.display import events, frames
from apps.chat.display.bubbles import bubble_fragments
from apps.chat.models import Thread
from apps.chat.selectors import messages_to_sync, thread_message, threads_for_user

logger = logging.getLogger(__name__)
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
# Parley's own "reconnect and catch up" (daphne can only send 1000 or 3000-4999, so not the
# standard 1012 "service restart"); the page's script reconnects on it.
CLOSE_RECONNECT = 4012
MAX_PENDING_IDS = 500
# A page syncs once per connection; more often than this is a broken or hostile client, and
# each sync renders a snapshot.
SYNC_MIN_INTERVAL_SECONDS = 1.0
# How often a tab checks that Redis (and the channel layer's groups) did not restart empty.
EPOCH_CHECK_SECONDS = 5.0
# The last frame of a sync: the page (and tests) know the tab has caught up.
SYNCED = '<div id="sync-state" hx-swap-oob="true" data-synced="true"></div>'


class GroupSocket(AsyncWebsocketConsumer):
    """A tab's socket on channel-layer groups: joins them once the owner is known, forwards
    pre-rendered fragments, and reconnects the tab when Redis restarted empty."""

    async def connect(self) -> None:
        self.groups_joined: list[str] = []
        self.epoch = ""  # the Redis epoch when this tab joined its groups
        self.epoch_watch: asyncio.Task | None = None
        self.user = self.scope.get("user")
        # Accept, then close with a 4xxx code: browsers and htmx do not retry those.
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            self.user = None
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def join(self, groups: list[str]) -> None:
        self.epoch = await livestate.redis_epoch(livestate.async_client())
        self.epoch_watch = asyncio.ensure_future(self._watch_epoch())
        self.groups_joined = groups
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        if self.epoch_watch is not None:
            self.epoch_watch.cancel()
        for group in self.groups_joined:
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:  # Redis is away; the group entry expires on its own
                break

    async def _watch_epoch(self) -> None:
        """Redis restarted empty: the groups this tab joined are gone with it. Ask the page to
        reconnect; it joins again and catches up exactly."""
        while True:
            await asyncio.sleep(EPOCH_CHECK_SECONDS)
            try:
                epoch = await livestate.redis_epoch(livestate.async_client())
            except Exception as exc:  # Redis is away; look again
                logger.debug("Could not read the Redis epoch: %s", exc)
                continue
            if epoch != self.epoch:
                await self.close(code=CLOSE_RECONNECT)
                return

    async def chat_html(self, event: dict) -> None:
        """A pre-rendered out-of-band fragment that is not a message (a thread's new name,
        the session's controls, a finished turn)."""
        await self.send(text_data=event["html"])


class UserConsumer(GroupSocket):
    """The socket of a page that shows no thread (the sessions list): what concerns the
    person everywhere — a finished turn's notice, the sessions' unread badges."""

    async def connect(self) -> None:
        await super().connect()
        if self.user is None:
            return
        try:
            await self.join([events.user_group(self.user.pk)])
        except RedisError as exc:
            logger.warning("Could not join a tab's groups (%s); asking it to reconnect", exc)
            await self.close(code=CLOSE_RECONNECT)


class ThreadConsumer(GroupSocket):
    async def connect(self) -> None:
        self.thread: Thread | None = None
        self.seen: dict[str, int] = {}  # message id -> last sequence number this tab has
        self.last_sync = -SYNC_MIN_INTERVAL_SECONDS
        await super().connect()
        if self.user is None:
            return
        self.thread = await self._owned_thread(
            self.user, self.scope["url_route"]["kwargs"]["thread"]
        )
        if self.thread is None:
            await self.close(code=CLOSE_NOT_FOUND)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Only `sync` frames mean anything; anything malformed is ignored, never fatal."""
        thread = self.thread
        if thread is None or not text_data:
            return
        try:
            data = json.loads(text_data)
        except (ValueError, RecursionError):
            return
        if not isinstance(data, dict) or data.get("type") != "sync":
            return
        now = time.monotonic()
        if now - self.last_sync < SYNC_MIN_INTERVAL_SECONDS:
            return
        self.last_sync = now
        try:
            await self._catch_up(thread, data)
        except RedisError as exc:
            # Redis is away or just restarted: ask the page to reconnect and sync again, rather
            # than crash this socket.
            logger.warning("Could not sync a tab (%s); asking it to reconnect", exc)
            self.groups_joined = []
            await self.close(code=CLOSE_RECONNECT)

    async def _catch_up(self, thread: Thread, data: dict) -> None:
        after_seq = data.get("after_seq", 0)
        if isinstance(after_seq, bool) or not isinstance(after_seq, int):
            after_seq = 0  # Infinity, NaN, strings, floats: start from nothing
        after_seq = min(max(0, after_seq), events.SETTLED_SEQ)
        raw_pending = data.get("pending")
        pending = []
        for raw in raw_pending[:MAX_PENDING_IDS] if isinstance(raw_pending, list) else []:
            try:
                pending.append(str(uuid.UUID(str(raw))))
            except ValueError:
                continue
        if not self.groups_joined:
            # Join before reading the snapshot: anything published after the read arrives
            # through the group, and whatever overlaps is dropped by its sequence number.
            await self.join(
                [
                    events.thread_group(thread.public_id),
                    events.session_group(thread.session.public_id),
                    events.user_group(thread.session.owner_id),
                ]
            )
        messages = await database_sync_to_async(messages_to_sync)(
            thread=thread, after_seq=after_seq, known=pending
        )
        live_texts: dict[str, str] = {}
        redis = livestate.async_client()
        for message in messages:
            message_id = str(message.public_id)
            if message.in_flight:
                snapshot = await livestate.live_snapshot(redis, message_id)
                live_texts[message_id] = snapshot.text if snapshot else message.text
                self.seen[message_id] = snapshot.seq if snapshot else 0
            else:
                self.seen[message_id] = events.SETTLED_SEQ
        new = [message for message in messages if message.seq > after_seq]
        shown = [message for message in messages if message.seq <= after_seq]
        replaced = await database_sync_to_async(bubble_fragments)(
            shown, live_texts=live_texts, oob=True
        )
        appended = await database_sync_to_async(bubble_fragments)(new, live_texts=live_texts)
        await self._send_frames(frames.pack(replaced) + frames.pack(appended, appended=True))
        # The queue and the auto-round line as they are now; bubbles the tab still shows as
        # waiting that no longer exist (a next member who will not speak) go.
        status = await database_sync_to_async(events.thread_status_event)(thread_id=thread.pk)
        gone = set(pending) - {str(message.public_id) for message in messages}
        await self._send_frames([status["html"], *events.removed_fragments(sorted(gone))])
        await self.send(text_data=SYNCED)

    async def _send_frames(self, texts: list[str]) -> None:
        for text in texts:
            await self.send(text_data=text)

    async def chat_append(self, event: dict) -> None:
        for message_id in event["messages"]:
            self.seen.setdefault(message_id, 0)
        await self._send_frames(frames.pack(event["fragments"], appended=True))

    async def chat_delta(self, event: dict) -> None:
        message_id, seq = event["message"], event["seq"]
        last = self.seen.get(message_id, 0)
        if seq <= last:
            return  # the snapshot already held it
        if seq != last + 1:
            await self._resync(message_id)
            return
        self.seen[message_id] = seq
        await self._send_frames(frames.pack(frames.appended_text(message_id, event["text"])))

    async def chat_state(self, event: dict) -> None:
        message_id, seq = event["message"], event["seq"]
        if event.get("reset"):
            self.seen[message_id] = 0  # the reply runs again from the start
            await self._send_frames(frames.pack(event["fragments"]))
            return
        if seq <= self.seen.get(message_id, 0):
            return
        self.seen[message_id] = seq
        await self._send_frames(frames.pack(event["fragments"]))

    async def _resync(self, message_id: str) -> None:
        """A delta went missing (the layer dropped it): replace the bubble from the live tail."""
        snapshot = await livestate.live_snapshot(livestate.async_client(), message_id)
        message = await database_sync_to_async(thread_message)(
            thread=self.thread, public_id=message_id
        )
        if message is None:
            return
        live_texts = None
        if message.in_flight and snapshot is not None:
            live_texts = {message_id: snapshot.text}
            self.seen[message_id] = snapshot.seq
        else:
            self.seen[message_id] = events.SETTLED_SEQ
        fragments = await database_sync_to_async(bubble_fragments)(
            [message], live_texts=live_texts, oob=True
        )
        await self._send_frames(frames.pack(fragments))

    @database_sync_to_async
    def _owned_thread(self, user, public_id) -> Thread | None:
        return (
            threads_for_user(user=user)
            .select_related("session")
            .filter(public_id=public_id)
            .first()
        )
