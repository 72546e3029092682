"""Something written once for many replies (a thread's summary, an image's description): the
first reply that needs it writes it under a Redis lock; the others wait for the stored result
and read it. A writer that died lets its lock expire; a waiter that gives up writes itself."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def written_once(
    redis,
    key: str,
    *,
    stored: Callable[[], Awaitable[T | None]],
    write: Callable[[], Awaitable[T]],
    wait_seconds: float,
    lock_seconds: int,
) -> T:
    """`stored()` when another writer has written it, else `write()` under the lock `key`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    while True:
        found = await stored()
        if found is not None:
            return found
        if await redis.set(key, "1", nx=True, ex=lock_seconds) or loop.time() > deadline:
            break
        await asyncio.sleep(0.25)
    try:
        return await write()
    finally:
        await redis.delete(key)
