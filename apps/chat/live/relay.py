"""The web process's one reader of the live bus, handing pushes to the tabs that follow them.

Every open tab of the process follows a few topics (its thread, session and person). One task
per event loop reads every followed topic's new entries in one blocking round trip and hands
each to its followers in process: no Redis round trip, no database housekeeping and no copy
per tab on the way. A tab that is handed a number past the next one it expects resyncs (see
`consumers.GroupSocket`); a tab that was handed nothing while its topic moved on (a push lost
between the reader and the tab) is told so on the reader's heartbeat, and resyncs too.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from typing import Any, Protocol

from django.conf import settings

from apps.chat import livebus, livestate
from apps.chat.wire import Wire

logger = logging.getLogger(__name__)
# A blocking read returns at least this often: the heartbeat runs, and redis-py's socket
# timeout (5 s by default) never fires on an idle process.
BLOCK_MS = 1000
HEARTBEAT_SECONDS = 1.0
RETRY_SECONDS = 0.5


class Follower(Protocol):
    def deliver(self, topic: str, number: int, event: dict[str, Any]) -> None:
        """Take a push (must not block: the reader serves every tab of the process)."""

    def heartbeat(self, topic: str, number: int) -> None:
        """The reader has handed out every push of `topic` up to `number`."""


class Relay:
    def __init__(self) -> None:
        self.followers: dict[str, set[Follower]] = {}
        self.position: dict[str, int] = {}  # topic -> the last number handed out
        self.wake_key = f"{livestate.PREFIX}:bus:wake:{uuid.uuid4().hex}"
        self.task: asyncio.Task | None = None
        self.failures = 0
        # Its own lean connection: the blocking read holds it, once a push (see `wire`).
        self.wire = Wire(settings.REDIS_URL)

    @property
    def redis(self):
        return livestate.async_client()

    async def follow(self, follower: Follower, topics: list[str]) -> dict[str, int]:
        """Start handing `topics` to `follower`; the number each topic is at. Everything
        published after this call returns reaches the follower."""
        new = [topic for topic in topics if topic not in self.position]
        if new:
            heads = await livebus.heads(self.redis, new)
            for topic in new:
                self.position.setdefault(topic, heads[topic])
        for topic in topics:
            self.followers.setdefault(topic, set()).add(follower)
            self.position.setdefault(topic, 0)  # unfollowed while the heads were read
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._read_forever())
        elif new:
            await livebus.wake(self.redis, self.wake_key)  # read the new topics from now
        return {topic: self.position[topic] for topic in topics}

    def unfollow(self, follower: Follower) -> None:
        for topic in list(self.followers):
            self.followers[topic].discard(follower)
            if not self.followers[topic]:
                del self.followers[topic]
                self.position.pop(topic, None)
        if not self.followers and self.task is not None:
            self.task.cancel()
            self.task = None
            self.wire.close()  # a read cancelled mid-wait would leave its reply to a later one

    async def _read_forever(self) -> None:
        last_beat = time.monotonic()
        while self.followers:
            try:
                pushes = await livebus.read_on(
                    self.wire, dict(self.position), block_ms=BLOCK_MS, wake=self.wake_key
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis is away: the tabs resync from the gap it leaves
                self.failures += 1
                if self.failures == 1 or self.failures % 60 == 0:
                    logger.warning("Could not read the live bus (%s); retrying", exc)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            self.failures = 0
            self._hand_out(pushes)
            if pushes:
                # The tabs send what they were handed before this task asks Redis again:
                # otherwise every push waited out the next read's round trip to be sent.
                await asyncio.sleep(0)
            now = time.monotonic()
            if now - last_beat >= HEARTBEAT_SECONDS:
                last_beat = now
                self._beat()

    def _hand_out(self, pushes: list[tuple[str, int, dict[str, Any]]]) -> None:
        for topic, number, event in pushes:
            last = self.position.get(topic)
            if last is None or number <= last:
                continue  # unfollowed meanwhile, or read twice
            self.position[topic] = number
            for follower in tuple(self.followers.get(topic, ())):
                follower.deliver(topic, number, event)

    def _beat(self) -> None:
        for topic, followers in self.followers.items():
            number = self.position.get(topic, 0)
            for follower in tuple(followers):
                follower.heartbeat(topic, number)


_relays: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def relay() -> Relay:
    """This event loop's relay (daphne runs one loop; tests run one per test)."""
    loop = asyncio.get_running_loop()
    found = _relays.get(loop)
    if found is None:
        found = _relays[loop] = Relay()
    return found
