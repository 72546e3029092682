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

from apps.chat.wire import Wire

PREFIX = "parley"
LIVE_TTL_SECONDS = 6 * 3600  # far longer than any reply; a crashed worker leaves no litter
AFTER_FINISH_TTL_SECONDS = 120  # snapshots taken during the final push still find the tail
CANCEL_TTL_SECONDS = 3600
# A streaming worker holds a lease on its reply and renews it while it runs; a reply whose
# lease has lapsed belongs to a worker that died, and may be taken over.
# The lease is the worker process's heartbeat: renewed every second by a thread of its own (so
# a busy event loop never lets it lapse; four missed renewals would), it lapses within 5 s of
# the process's death, and the other workers' next look (every second) takes the reply over.
LEASE_TTL_SECONDS = 5
LEASE_RENEW_SECONDS = 1


def text_key(message_id: str) -> str:
    return f"{PREFIX}:live:{message_id}:text"


def seq_key(message_id: str) -> str:
    return f"{PREFIX}:live:{message_id}:seq"


def _cancel_key(message_id: str) -> str:
    return f"{PREFIX}:cancel:{message_id}"


def _lease_key(message_pk: int) -> str:
    return f"{PREFIX}:lease:{message_pk}"


# Workers subscribe here: a cancel reaches the worker streaming the reply at once. The flag key
# stays the record, for a reply whose stream starts (or whose worker reconnects) after it.
CANCEL_CHANNEL = f"{PREFIX}:cancels"


# Renew or release a lease only while it is still ours (a later run may own it by then). A
# lease that is simply gone (Redis restarted empty) is taken again: its stream is alive.
_RENEW_IF_OWNER = (
    "local owner = redis.call('get', KEYS[1]) "
    "if owner == ARGV[1] then return redis.call('expire', KEYS[1], ARGV[2]) end "
    "if not owner then redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 1 end "
    "return 0"
)
# Append to a live tail only if it still exists: after Redis restarted empty, a bare APPEND
# would start a tail holding only the newest text, numbered from 1 again.
_APPEND_IF_LIVE = (
    "if redis.call('exists', KEYS[2]) == 0 then return -1 end "
    "redis.call('append', KEYS[1], ARGV[1]) "
    "return redis.call('incr', KEYS[2])"
)
_RELEASE_IF_OWNER = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end"
)


async def lease_acquire(client: aioredis.Redis, message_pk: int, owner: str) -> bool:
    """Take the reply for this run; False when a live worker already streams it."""
    return bool(await client.set(_lease_key(message_pk), owner, nx=True, ex=LEASE_TTL_SECONDS))


async def lease_release(client: aioredis.Redis, message_pk: int, owner: str) -> None:
    await client.eval(_RELEASE_IF_OWNER, 1, _lease_key(message_pk), owner)


async def leases_release(client: aioredis.Redis, leases: dict[int, str]) -> None:
    """Release many leases (message pk -> owner) in one round trip."""
    async with client.pipeline(transaction=False) as pipe:
        for message_pk, owner in leases.items():
            pipe.eval(_RELEASE_IF_OWNER, 1, _lease_key(message_pk), owner)
        await pipe.execute()


def leases_renew(client: redis.Redis, leases: dict[int, str]) -> list[int]:
    """Renew every lease a worker holds in one round trip (message pk -> owner); return the
    replies whose lease is no longer this worker's (it lapsed and another run took over)."""
    if not leases:
        return []
    with client.pipeline(transaction=False) as pipe:
        for message_pk, owner in leases.items():
            pipe.eval(_RENEW_IF_OWNER, 1, _lease_key(message_pk), owner, LEASE_TTL_SECONDS)
        renewed = pipe.execute()
    return [pk for pk, kept in zip(leases, renewed, strict=True) if not kept]


def leases_held(message_pks: list[int]) -> set[int]:
    """Which of these replies a live worker is streaming right now."""
    if not message_pks:
        return set()
    with sync_client() as client, client.pipeline(transaction=False) as pipe:
        for pk in message_pks:
            pipe.exists(_lease_key(pk))
        return {pk for pk, held in zip(message_pks, pipe.execute(), strict=True) if held}


def sweep_claim(interval_seconds: float) -> bool:
    """Whether this worker makes this interval's look for replies left behind: one look per
    interval among all the workers (whichever asks first), not one each. True when Redis
    cannot say: the look is also what recovers from Redis's outages."""
    try:
        return bool(shared_sync_client().set(
            f"{PREFIX}:recovery-sweep", "1", nx=True, px=max(1, int(interval_seconds * 900))
        ))  # fmt: skip
    except redis.RedisError:
        return True


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
        client = aioredis.Redis.from_url(
            settings.REDIS_URL,
            decode_responses=True,
            max_connections=settings.PARLEY_REDIS_MAX_CONNECTIONS,
        )
        _async_clients[loop] = client
    return client


_wires: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def wire() -> Wire:
    """This event loop's lean connection (see `wire`): a worker's publishes of streamed text."""
    loop = asyncio.get_running_loop()
    found = _wires.get(loop)
    if found is None:
        found = _wires[loop] = Wire(settings.REDIS_URL)
    return found


def sync_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)


_shared_sync_clients: dict[str, redis.Redis] = {}


def shared_sync_client() -> redis.Redis:
    """The process's long-lived client for synchronous code (thread-safe: it pools its
    connections), so a publish does not open a connection of its own."""
    client = _shared_sync_clients.get(settings.REDIS_URL)
    if client is None:
        client = _shared_sync_clients[settings.REDIS_URL] = redis.Redis.from_url(
            settings.REDIS_URL,
            decode_responses=True,
            max_connections=settings.PARLEY_REDIS_MAX_CONNECTIONS,
        )
    return client


async def live_reset(client: aioredis.Redis, message_id: str, text: str = "") -> int:
    """Start a live tail with `text` (empty, or the text a taken-over reply continues); return
    the sequence to continue from."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.set(text_key(message_id), text, ex=LIVE_TTL_SECONDS)
        pipe.incr(seq_key(message_id))
        pipe.expire(seq_key(message_id), LIVE_TTL_SECONDS)
        _, seq, _ = await pipe.execute()
    return int(seq)


async def live_append(client: aioredis.Redis, message_id: str, chunk: str) -> int:
    """Append a published chunk and return its sequence number, atomically."""
    (seq,) = await live_append_many(client, [(message_id, chunk)])
    return seq


async def live_append_many(client: aioredis.Redis, chunks: list[tuple[str, str]]) -> list[int]:
    """Append one chunk to each of several tails in one atomic round trip; their sequence
    numbers, in order (a snapshot never sees a chunk without its number). -1 for a tail that
    no longer exists (Redis lost it): the caller seeds it again with `live_reseed`."""
    async with client.pipeline(transaction=True) as pipe:
        for message_id, chunk in chunks:
            pipe.eval(_APPEND_IF_LIVE, 2, text_key(message_id), seq_key(message_id), chunk)
        results = await pipe.execute()
    return [int(seq) for seq in results]


async def live_reseed(client: aioredis.Redis, message_id: str, text: str, seq: int) -> None:
    """Put a lost tail back: the whole text so far, numbered after every delta already sent
    (tabs drop numbers they have seen)."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.set(text_key(message_id), text, ex=LIVE_TTL_SECONDS)
        pipe.set(seq_key(message_id), seq, ex=LIVE_TTL_SECONDS)
        await pipe.execute()


async def live_finish(client: aioredis.Redis, message_id: str, *, at_least: int = 0) -> int:
    """Keep the tail briefly for late snapshots; return the sequence for the final push
    (`at_least`: past every number the caller sent, should Redis have lost the tail)."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.get(seq_key(message_id))
        pipe.expire(text_key(message_id), AFTER_FINISH_TTL_SECONDS)
        pipe.expire(seq_key(message_id), AFTER_FINISH_TTL_SECONDS)
        seq, _, _ = await pipe.execute()
    # The final push outranks every delta; the stored seq stays at the last delta so that a
    # snapshot taken now never swallows the final push.
    return max(int(seq or 0) + 1, at_least)


async def live_snapshot(client: aioredis.Redis, message_id: str) -> LiveSnapshot | None:
    """The text published so far and the sequence number of its last delta, read atomically."""
    text, seq = await client.mget(text_key(message_id), seq_key(message_id))
    if text is None or seq is None:
        return None
    return LiveSnapshot(text=text if isinstance(text, str) else text.decode(), seq=int(seq))


def text_shown(*, saved: str, tail: str | None) -> str:
    """What the tabs of a streaming reply were shown: its live tail when that extends the
    last checkpoint, otherwise the checkpoint (the tail is gone, or from an earlier run)."""
    return tail if tail is not None and tail.startswith(saved) else saved


def live_texts(message_ids: list[str]) -> dict[str, str]:
    """The text published so far of each of these replies that still has a live tail."""
    if not message_ids:
        return {}
    with sync_client() as client:
        texts = client.mget([text_key(message_id) for message_id in message_ids])
    return {mid: text for mid, text in zip(message_ids, texts, strict=True) if text is not None}


def request_cancel(message_ids: list[str], *, restart: bool = False) -> None:
    """Flag replies for cancellation; their workers close the provider stream on the flag.

    With `restart`, the worker runs the reply again once it has stopped.
    """
    if not message_ids:
        return
    with sync_client() as client, client.pipeline(transaction=False) as pipe:
        for message_id in message_ids:
            pipe.set(_cancel_key(message_id), "restart" if restart else "1", ex=CANCEL_TTL_SECONDS)
        pipe.publish(CANCEL_CHANNEL, " ".join(message_ids))
        pipe.execute()


def withdraw_cancel(message_id: str) -> None:
    """Forget a Stop once its run has settled and a new run of the reply starts (Retry,
    Regenerate, Continue): the flag lives an hour, and only a worker that stops the reply
    itself clears it — when the web process settled a dead worker's reply, nobody did."""
    with sync_client() as client:
        client.delete(_cancel_key(message_id))


def request_restart(message_ids: list[str]) -> None:
    request_cancel(message_ids, restart=True)


async def restart_requested(client: aioredis.Redis, message_id: str) -> bool:
    return await client.get(_cancel_key(message_id)) == "restart"


async def cancel_requested(client: aioredis.Redis, message_id: str) -> bool:
    return bool(await client.exists(_cancel_key(message_id)))


async def cancels_requested(client: aioredis.Redis, message_ids: list[str]) -> list[str]:
    """Which of these replies have been asked to stop (after a missed announcement)."""
    if not message_ids:
        return []
    flags = await client.mget([_cancel_key(message_id) for message_id in message_ids])
    return [message_id for message_id, flag in zip(message_ids, flags, strict=True) if flag]


async def clear_cancel(client: aioredis.Redis, message_id: str) -> None:
    await client.delete(_cancel_key(message_id))
