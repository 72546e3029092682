"""SDK clients kept for the life of a long-lived event loop (a worker's stream hub).

Building a client builds an SSL context and a connection pool, a large share of a short
reply's cost. A loop that lives as long as its process opts in with `keep_clients_for`; there a
client is made once per provider, credential, base URL and timeout. Anywhere else (a request,
a test's own loop) `client_scope` gives a fresh client and closes it inside the loop that used
it, since one left to the garbage collector would try to close after its loop has gone.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

C = TypeVar("C")

_kept: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, Any]] = (
    weakref.WeakKeyDictionary()
)


def keep_clients_for(loop: asyncio.AbstractEventLoop) -> None:
    """Let SDK clients made on `loop` be reused until the loop is gone."""
    _kept.setdefault(loop, {})


def client_key(kind: str, api_key: str, base_url: str, *extra: Hashable) -> tuple:
    """A cache key that does not keep the API key itself in one more place."""
    return (kind, hashlib.sha256(api_key.encode()).hexdigest(), base_url, *extra)


@asynccontextmanager
async def client_scope(
    key: Hashable, make: Callable[[], C], close: Callable[[C], Any]
) -> AsyncIterator[C]:
    """A client for one call: the loop's kept one, or a fresh one closed afterwards."""
    kept = _kept.get(asyncio.get_running_loop())
    if kept is not None:
        client = kept.get(key)
        if client is None:
            client = kept[key] = make()
        yield client
        return
    client = make()
    try:
        yield client
    finally:
        await close(client)
