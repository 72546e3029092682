"""The websockets of open tabs: forward pre-rendered HTML, write nothing.

A tab on a thread has one socket (`ThreadConsumer`) following the thread's, its session's and
its person's topics on the live bus, once it has checked the person may read the thread (the
owner, a member, a viewer). Any other page of a signed-in person (the sessions list) follows
their own topic only (`UserConsumer`): finished turns, the sessions' unread badges. A push
about a whisper names its audience, and the tabs of everyone else drop it; a person taken out
of the room is told on their own topic, and their tabs on it close.

Thread protocol: after connecting, the page sends {"type": "sync", "after_seq": N, "pending": [ids]}
(the last sequence number it shows and the replies it shows as unfinished). The consumer then
follows the thread's topics, sends what the tab lacks — newer bubbles appended, unfinished ones
replaced with their live text — and forwards pushes, dropping any delta the snapshot already
contained.

What the tab shows is state the consumer checks, not a stream it hopes is whole: each topic's
pushes are numbered without gaps, and a number that skips (a push was lost or trimmed, Redis
restarted empty), a heartbeat saying the topic moved on without this tab, an overflowing inbox
or a reply's own sequence skipping all make the consumer resync that part from the live tail
and the database.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import deque
from typing import Any

from autobahn.exception import Disconnected
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from redis.exceptions import RedisError

from apps.chat import livestate
from apps.chat.display import events, frames
from apps.chat.display.bubbles import bubble_fragments
from apps.chat.display.rooms import room_banner, typing_fragment
from apps.chat.live import presence, tab_reads
from apps.chat.live.relay import relay
from apps.chat.live.shutdown import CLOSE_RECONNECT, open_tabs, stopping
from apps.chat.models import Message, Thread
from apps.chat.selectors import messages_to_sync

logger = logging.getLogger(__name__)
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_RELOAD = 4013  # the person's rights in the room changed: the page reloads
MAX_PENDING_IDS = 500
# A page syncs once per connection; more often than this is a broken or hostile client, and
# each sync renders a snapshot.
SYNC_MIN_INTERVAL_SECONDS = 1.0
# Pushes waiting for one tab; past this the tab is too slow to follow push by push, and one
# resync replaces everything it missed.
INBOX_LIMIT = 5000
# The last frame of a sync: the page (and tests) know the tab has caught up.
SYNCED = '<div id="sync-state" hx-swap-oob="true" data-synced="true"></div>'


class GroupSocket(AsyncWebsocketConsumer):
    """A tab's socket on live-bus topics: follows them once the owner is known, forwards
    pre-rendered fragments in order, and resyncs whatever it finds it has missed."""

    async def connect(self) -> None:
        self.topics: list[str] = []
        self.numbers: dict[str, int] = {}  # topic -> the number of the last push applied
        self.inbox: deque[tuple[str, int, dict[str, Any]]] = deque()
        self.stale: set[str] = set()  # topics to resync before the next push
        self.inbox_ready = asyncio.Event()
        # One writer at a time: a snapshot and the pushes that follow it go out in order.
        self.sending = asyncio.Lock()
        self.drainer: asyncio.Task | None = None
        self.user = self.scope.get("user")
        session = self.scope.get("session")
        self.session_digest = events.session_digest(session.session_key if session else None)
        # Accept, then close with a 4xxx code: browsers and htmx do not retry those.
        await self.accept()
        open_tabs.add(self)
        if stopping.now:  # this process is stopping: reconnect to one that is not
            self.user = None  # (the subclasses then go no further)
            await self.close(code=CLOSE_RECONNECT)
            return
        if self.user is None or not self.user.is_authenticated:
            self.user = None
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def follow(self, topics: list[str], *, forward: bool = True) -> None:
        """Follow topics; everything published from now on reaches this tab (with
        `forward=False`, it waits in the inbox until `start_forwarding`)."""
        self.numbers.update(await relay().follow(self, topics))
        self.topics = topics
        if forward:
            self.start_forwarding()

    def start_forwarding(self) -> None:
        if self.drainer is None:
            self.drainer = asyncio.ensure_future(self._drain_forever())

    async def send(self, text_data=None, bytes_data=None, close=False) -> None:
        """Send, unless the tab has gone meanwhile: a snapshot or push that finds the socket
        closed (the tab reloaded, or left) is normal, not an error worth a traceback."""
        try:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        except Disconnected:
            logger.debug("A tab closed its socket before a frame reached it")

    async def disconnect(self, code: int) -> None:
        open_tabs.discard(self)
        relay().unfollow(self)
        if self.drainer is not None:
            self.drainer.cancel()

    # --- called by the relay (never blocks) -----------------------------------------------------

    def deliver(self, topic: str, number: int, event: dict[str, Any]) -> None:
        if len(self.inbox) >= INBOX_LIMIT:
            logger.warning(
                "A tab fell %d pushes behind on %s; dropping them and resyncing it",
                len(self.inbox), ", ".join(self.topics),
            )  # fmt: skip
            self.inbox.clear()
            self.stale.update(self.topics)
            position = relay().position
            self.numbers.update({own: position.get(own, 0) for own in self.topics})
        self.inbox.append((topic, number, event))
        self.inbox_ready.set()

    def heartbeat(self, topic: str, number: int) -> None:
        """Every push up to `number` was handed out; if this tab has applied fewer and waits
        for none, one went missing on the way: resync."""
        if not self.inbox and not self.inbox_ready.is_set() and self.numbers.get(topic, 0) < number:
            logger.warning("A tab missed pushes %d..%d of %s; resyncing it",
                           self.numbers.get(topic, 0) + 1, number, topic)  # fmt: skip
            self.numbers[topic] = number
            self.stale.add(topic)
            self.inbox_ready.set()

    # --- the tab's own task -------------------------------------------------------------------

    async def _drain_forever(self) -> None:
        while True:
            await self.inbox_ready.wait()
            self.inbox_ready.clear()
            try:
                async with self.sending:
                    await self._drain()
            except RedisError as exc:  # Redis is away: the heartbeat resyncs once it is back
                logger.warning("Could not resync a tab (%s)", exc)
            except Exception:
                logger.exception("A tab's pushes failed; resyncing it")
                self.stale.update(self.topics)

    async def _drain(self) -> None:
        """Apply every waiting push in order, as one frame where they fit."""
        fragments: list[str] = []
        while self.inbox:
            topic, number, event = self.inbox.popleft()
            last = self.numbers.get(topic, 0)
            if number <= last:
                continue  # a push the tab's snapshot already held
            if last and number != last + 1:
                logger.warning("A tab missed pushes %d..%d of %s; resyncing it",
                               last + 1, number - 1, topic)  # fmt: skip
                self.stale.add(topic)
            self.numbers[topic] = number
            # Shown even after a gap: it is the newest of what it carries, and the resync
            # that follows it repairs what went missing before it.
            fragments += self.fragments_of(event)
        await self._send_frames(frames.pack(fragments))
        while self.stale:
            await self.resync(self.stale.pop())

    def fragments_of(self, event: dict[str, Any]) -> list[str]:
        """What a push shows (pre-rendered: a thread's new name, the session's controls)."""
        kind = event.get("type")
        if kind == "account.ended" or (
            kind == "account.signed_out" and event.get("session") == self.session_digest
        ):  # the account was disabled, or this browser signed out: the tab is signed out
            self.closing = asyncio.ensure_future(self.close(code=CLOSE_UNAUTHENTICATED))
            return []
        html = event.get("html")
        return [html] if isinstance(html, str) else []

    async def resync(self, topic: str) -> None:
        """Show the present state of what a topic carries, after pushes were lost."""

    async def _send_frames(self, texts: list[str]) -> None:
        for text in texts:
            await self.send(text_data=text)


class UserConsumer(GroupSocket):
    """The socket of a page that shows no thread (the sessions list): what concerns the
    person everywhere — a finished turn's notice, the sessions' unread badges."""

    async def connect(self) -> None:
        await super().connect()
        if self.user is None:
            return
        try:
            await self.follow([events.user_group(self.user.pk)])
        except RedisError as exc:
            logger.warning("Could not follow a tab's topics (%s); asking it to reconnect", exc)
            await self.close(code=CLOSE_RECONNECT)


def _catch_up_frames(
    messages: list[Message], *, after_seq: int, live_texts: dict[str, str],
    status_of: int | None, gone: list[str],
) -> list[str]:  # fmt: skip
    """A sync's frames, rendered in one call on the database thread: the bubbles the tab shows
    replaced and the newer ones appended; with `status_of` (a thread's pk), the queue and
    auto-round line as they are now, the thread's name as it is now (one given before the
    socket followed would never reach the page) and, gone, the bubbles the tab still shows
    as waiting that no longer exist (a next member who will not speak)."""
    shown = [message for message in messages if message.seq <= after_seq]
    new = [message for message in messages if message.seq > after_seq]
    texts = frames.pack(bubble_fragments(shown, live_texts=live_texts, oob=True))
    texts += frames.pack(bubble_fragments(new, live_texts=live_texts), appended=True)
    if status_of is not None:
        line = events.thread_status_event(thread_id=status_of)
        title = events.thread_title_fragment(thread_id=status_of)
        texts += [line["html"], title, *events.removed_fragments(gone)]
    return texts


class ThreadConsumer(GroupSocket):
    async def connect(self) -> None:
        self.thread: Thread | None = None
        self.seen: dict[str, int] = {}  # message id -> last sequence number this tab has
        self.high_seq = 0  # the newest message (by thread sequence) the tab shows
        self.last_sync = -SYNC_MIN_INTERVAL_SECONDS
        self.replies_to_resync: set[str] = set()
        await super().connect()
        if self.user is None:
            return
        self.thread = await database_sync_to_async(tab_reads.readable_thread)(
            self.user, self.scope["url_route"]["kwargs"]["thread"]
        )
        if self.thread is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.session_id = str(self.thread.session.public_id)
        self.presence: str | None = None  # this tab's entry, in a shared room
        self.can_talk = False  # known at the sync: a viewer's typing is shown to nobody
        self.beating: asyncio.Task | None = None
        self.last_typing = 0.0

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Only `sync` frames mean anything; anything malformed is ignored, never fatal."""
        thread = self.thread
        if thread is None or not text_data:
            return
        try:
            data = json.loads(text_data)
        except (ValueError, RecursionError):
            return
        if isinstance(data, dict) and data.get("type") == "typing":
            await self._typing()
            return
        if not isinstance(data, dict) or data.get("type") != "sync":
            return
        now = time.monotonic()
        if now - self.last_sync < SYNC_MIN_INTERVAL_SECONDS:
            return
        self.last_sync = now
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
        try:
            if not self.topics:
                # Follow before reading the snapshot: anything published after the read
                # arrives as a push, and whatever overlaps is dropped by its sequence number.
                await self.follow(
                    [
                        events.thread_group(thread.public_id),
                        events.session_group(thread.session.public_id),
                        events.user_group(self.user.pk),
                    ],
                    forward=False,  # not a push before the access check below
                )
            # Access again, after following (a change from now on arrives as a push): the
            # person may have been taken out of the room since the socket opened.
            if not await self._still_readable():
                return
            async with self.sending:
                await self._catch_up(thread, after_seq=after_seq, pending=pending)
                digest = data.get("digest")
                if isinstance(digest, int) and not isinstance(digest, bool):
                    card = await database_sync_to_async(tab_reads.written_digest)(
                        user=self.user, digest_id=digest, thread_pk=thread.pk
                    )
                    if card:
                        await self.send(text_data=card)
                await self.send(text_data=SYNCED)
            self.start_forwarding()
            if self.presence is None and await presence.shared_room(thread.session_id):
                self.presence = presence.entry(
                    self.user.pk, str(thread.public_id), uuid.uuid4().hex
                )
                await presence.arrive(livestate.async_client(), self.session_id, self.presence)
                self.beating = asyncio.ensure_future(self._beat_forever())
        except RedisError as exc:
            # Redis is away or just restarted: ask the page to reconnect and sync again, rather
            # than crash this socket.
            logger.warning("Could not sync a tab (%s); asking it to reconnect", exc)
            await self.close(code=CLOSE_RECONNECT)

    async def _catch_up(
        self, thread: Thread, *, after_seq: int, pending: list[str], status: bool = True
    ) -> None:
        """Send what a tab showing the thread up to `after_seq`, with `pending` unfinished,
        lacks: newer bubbles appended, the unfinished ones replaced, and (with `status`) the
        queue line."""
        messages = await database_sync_to_async(messages_to_sync)(
            thread=thread, user=self.user, after_seq=after_seq, known=pending
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
            self.high_seq = max(self.high_seq, message.seq)
        self.high_seq = max(self.high_seq, after_seq)
        gone = set(pending) - {str(message.public_id) for message in messages}
        texts = await database_sync_to_async(_catch_up_frames)(
            messages, after_seq=after_seq, live_texts=live_texts,
            status_of=thread.pk if status else None, gone=sorted(gone),
        )  # fmt: skip
        await self._send_frames(texts)

    async def disconnect(self, code: int) -> None:
        await super().disconnect(code)
        beating, entry = getattr(self, "beating", None), getattr(self, "presence", None)
        if beating is not None:
            beating.cancel()
        if entry is not None:
            try:  # a goodbye never holds the socket's end up: the entry lapses on its own
                async with asyncio.timeout(presence.PRESENCE_BEAT_SECONDS):
                    await presence.leave(livestate.async_client(), self.session_id, entry)
            except (RedisError, TimeoutError) as exc:
                logger.warning("Could not say a tab left its room (%s)", exc)

    async def _beat_forever(self) -> None:
        entry = self.presence
        while entry is not None:
            await asyncio.sleep(presence.PRESENCE_BEAT_SECONDS)
            try:
                await presence.beat(livestate.async_client(), self.session_id, entry)
            except RedisError as exc:
                logger.warning("Could not keep a tab's presence (%s)", exc)

    async def _typing(self) -> None:
        """Someone types in a shared room: its tabs on the thread say so (at most every
        1.5 s per tab; nothing is written anywhere)."""
        now = time.monotonic()
        thread = self.thread
        if thread is None or self.presence is None or not self.can_talk:
            return
        if now - self.last_typing < presence.TYPING_MIN_INTERVAL_SECONDS:
            return
        self.last_typing = now
        try:
            await presence.typing(livestate.async_client(), str(thread.public_id), self.user)
        except RedisError as exc:
            logger.warning("Could not say someone is typing (%s)", exc)

    def fragments_of(self, event: dict[str, Any]) -> list[str]:
        kind = event.get("type")
        audience = event.get("audience")
        if kind == "room.typing":
            if event.get("user") == self.user.pk:
                return []
            return [typing_fragment(user_id=event["user"], name=event["name"])]
        if audience is not None and self.user.pk not in audience:
            return []  # a whisper, and this person is not among those it is for
        if kind in ("room.left", "room.changed") and event.get("session") == self.session_id:
            # Out of the room: the tab closes now (a reload gets a 404). A new role: the page
            # reloads with what it may do now.
            left = kind == "room.left"
            code = CLOSE_NOT_FOUND if left else CLOSE_RELOAD
            self.closing = asyncio.ensure_future(self.close(code=code))
            return [room_banner(left=left)]
        if kind == "chat.delta":
            return self._delta(event)
        if kind == "chat.state":
            return self._state(event)
        if kind == "chat.append":
            fragments, ids = event["fragments"], event["messages"]
            if len(fragments) == len(ids):
                # A new bubble announced after its reply's stream reached this tab (the
                # worker can be quicker than the announcer): its first, empty state would
                # wipe the text already shown.
                fragments = [
                    f for f, mid in zip(fragments, ids, strict=True) if not self.seen.get(mid)
                ]
            for message_id in ids:
                self.seen.setdefault(message_id, 0)
            self.high_seq = max([self.high_seq, *event.get("seqs", ())])
            return [frames.appended_to_transcript(fragment) for fragment in fragments]
        return super().fragments_of(event)

    def _delta(self, event: dict[str, Any]) -> list[str]:
        message_id, seq = event["message"], event["seq"]
        if message_id not in self.seen:
            return []  # not a bubble this tab shows (a whisper to others, an older page)
        last = self.seen[message_id]
        if seq <= last or message_id in self.replies_to_resync:
            return []  # the snapshot already held it, or a resync will show it
        if seq != last + 1:
            self.replies_to_resync.add(message_id)
            self.stale.add("replies")
            return []
        self.seen[message_id] = seq
        return frames.appended_text(message_id, event["text"])

    def _state(self, event: dict[str, Any]) -> list[str]:
        message_id, seq = event["message"], event["seq"]
        if event.get("reset"):
            self.seen[message_id] = 0  # the reply runs again from the start
            self.replies_to_resync.discard(message_id)
            return list(event["fragments"])
        if message_id not in self.seen:
            # A reply whose bubble this tab was never given: the worker was quicker than the
            # announcer of the post that made it (or the page is older than the message).
            # The replace has nothing to replace, and the append, when it comes, would be
            # taken for stale: fetch the bubble as it is now instead.
            self.replies_to_resync.add(message_id)
            self.stale.add("replies")
            return []
        if seq <= self.seen[message_id]:
            return []
        self.seen[message_id] = seq
        self.replies_to_resync.discard(message_id)
        return list(event["fragments"])

    async def _still_readable(self) -> bool:
        """Whether the person may still read the thread; if not, the socket closes. Also
        whether they may talk there (a viewer's typing is shown to nobody)."""
        thread = self.thread
        if thread is not None:
            readable, self.can_talk = await database_sync_to_async(tab_reads.tab_access)(
                self.user, thread.public_id
            )
            if readable is not None:
                return True
        self.thread = None
        await self.close(code=CLOSE_NOT_FOUND)
        return False

    async def resync(self, topic: str) -> None:
        thread = self.thread
        if thread is None or not await self._still_readable():
            return
        if topic == "replies":  # some replies' own deltas skipped a number
            ids, self.replies_to_resync = sorted(self.replies_to_resync), set()
            await self._catch_up(thread, after_seq=self.high_seq, pending=ids, status=False)
        elif topic == events.thread_group(thread.public_id):
            unfinished = [mid for mid, seq in self.seen.items() if seq < events.SETTLED_SEQ]
            self.replies_to_resync = set()
            await self._catch_up(thread, after_seq=self.high_seq, pending=unfinished)
        elif topic == events.session_group(thread.session.public_id):
            fragments = await database_sync_to_async(events.session_snapshot)(
                session_id=thread.session_id
            )
            await self._send_frames(frames.pack(fragments))
