"""The live tail of streaming replies and cancellation flags, kept in Redis.

The database is checkpointed on a slow timer; Redis holds the exact text already published
and the sequence number of the last delta, so a tab that (re)connects mid-stream gets a
snapshot that lines up with the deltas that follow it: no gap, no repeat.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass

import redis
import redis.asyncio as aioredis
from django.conf import settings

PREFIX = "parley"
LIVE_TTL_SECONDS = 6 * 3600  # far longer than any reply; a crashed worker leaves no litter
AFTER_FINISH_TTL_SECONDS = 120  # snapshots taken during the final push still find the tail
CANCEL_TTL_SECONDS = 3600


def _text_key(message_id: str) -> str:
    return f"{PREFIX}:live:{message_id}:text"


def _seq_key(message_id: str) -> str:
    return f"{PREFIX}:live:{message_id}:seq"


def _cancel_key(message_id: str) -> str:
    return f"{PREFIX}:cancel:{message_id}"


@dataclass(frozen=True)
class LiveSnapshot:
    text: str
    seq: int


_async_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def async_client() -> aioredis.Redis:
    """One client per event loop: redis.asyncio connections cannot cross loops."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
        _async_clients[loop] = client
    return client


def redis_for_task() -> aioredis.Redis:
    """A client owned by one short asyncio program (use as `async with`)."""
    return aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True)


def sync_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)


async def live_reset(client: aioredis.Redis, message_id: str) -> int:
    """Start (or restart) a live tail with empty text; return the sequence to continue from."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.set(_text_key(message_id), "", ex=LIVE_TTL_SECONDS)
        pipe.incr(_seq_key(message_id))
        pipe.expire(_seq_key(message_id), LIVE_TTL_SECONDS)
        _, seq, _ = await pipe.execute()
    return int(seq)


async def live_append(client: aioredis.Redis, message_id: str, chunk: str) -> int:
    """Append a published chunk and return its sequence number, atomically."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.append(_text_key(message_id), chunk)
        pipe.incr(_seq_key(message_id))
        _, seq = await pipe.execute()
    return int(seq)


async def live_finish(client: aioredis.Redis, message_id: str) -> int:
    """Keep the tail briefly for late snapshots; return the sequence for the final push."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.get(_seq_key(message_id))
        pipe.expire(_text_key(message_id), AFTER_FINISH_TTL_SECONDS)
        pipe.expire(_seq_key(message_id), AFTER_FINISH_TTL_SECONDS)
        seq, _, _ = await pipe.execute()
    # The final push outranks every delta; the stored seq stays at the last delta so that a
    # snapshot taken now never swallows the final push.
    return int(seq or 0) + 1


async def live_snapshot(client: aioredis.Redis, message_id: str) -> LiveSnapshot | None:
    """The text published so far and the sequence number of its last delta, read atomically."""
    text, seq = await client.mget(_text_key(message_id), _seq_key(message_id))
    if text is None or seq is None:
        return None
    return LiveSnapshot(text=text, seq=int(seq))


def request_cancel(message_ids: list[str]) -> None:
    """Flag replies for cancellation; their workers close the provider stream on the flag."""
    if not message_ids:
        return
    with sync_client() as client, client.pipeline(transaction=False) as pipe:
        for message_id in message_ids:
            pipe.set(_cancel_key(message_id), "1", ex=CANCEL_TTL_SECONDS)
        pipe.execute()


async def cancel_requested(client: aioredis.Redis, message_id: str) -> bool:
    return bool(await client.exists(_cancel_key(message_id)))


async def clear_cancel(client: aioredis.Redis, message_id: str) -> None:
    await client.delete(_cancel_key(message_id))
