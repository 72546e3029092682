"""SDK clients kept for the life of a long-lived event loop (a worker's stream hub), over
aiohttp.

Building a client builds an SSL context and a connection pool, a large share of a short
reply's cost. A loop that lives as long as its process opts in with `keep_clients_for`; there a
client is made once per provider, credential, base URL and timeout, and every client made for
the loop shares one aiohttp session (one connector: one pool of connections, one DNS cache).
Anywhere else (a request, a test's own loop) `client_scope` gives a fresh client and closes it
inside the loop that used it, since one left to the garbage collector would try to close after
its loop has gone.

The SDKs' own aiohttp transport (their `aiohttp` extra) replaces their default HTTP stack: it
costs less than half the CPU per streamed chunk (TECH_NOTES §10; issue 36), under the same
SDK API, errors and timeouts.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import aiohttp
import httpx2

# The transport both SDKs vendor (the same code, over the same httpx2): its public face is
# their `DefaultAioHttpClient`, which takes it as `transport`.
from openai._vendor.httpx_aiohttp.transport import AiohttpTransport, map_aiohttp_exceptions

C = TypeVar("C")

_kept: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, Any]] = (
    weakref.WeakKeyDictionary()
)
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)
# As many connections as the SDKs' own default pool: a worker's hundreds of streams to one
# provider each hold one for as long as they stream.
MAX_CONNECTIONS = 1000


def keep_clients_for(loop: asyncio.AbstractEventLoop) -> None:
    """Let SDK clients made on `loop` be reused until the loop is gone."""
    _kept.setdefault(loop, {})


async def close_kept_clients() -> None:
    """Close the running loop's shared session (its loop is winding down)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


class _Transport(AiohttpTransport):
    """The SDKs' aiohttp transport, over the loop's shared session (which outlives any client)
    or a session of its own, with a refused or dropped connection told apart from a timeout
    (the vendored mapping names every aiohttp connection error a connect timeout)."""

    def __init__(self, session: aiohttp.ClientSession | None) -> None:
        super().__init__(client=session)
        self.shared = session is not None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await super().handle_async_request(request)
        except httpx2.ConnectTimeout as exc:
            raise _told_apart(exc) from exc.__cause__
        response.stream = _TellingApart(response.stream, request)
        return response

    async def aclose(self) -> None:
        if not self.shared:
            await super().aclose()


class _TellingApart(httpx2.AsyncByteStream):
    def __init__(self, stream, request: httpx2.Request) -> None:
        self.stream = stream
        self.request = request  # for an error while reading `lines`, as httpx's own reads say

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.stream:
                yield chunk
        except httpx2.ConnectTimeout as exc:
            raise _told_apart(exc) from exc.__cause__

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines (without their `\\n`), read from aiohttp as they arrive: the
        same bytes as the SDK's `iter_lines`, without its five layers of async generators
        and text decoding per chunk (most of a streamed chunk's cost in the worker). Any
        length of line: aiohttp's own `readline` refuses one over 128 KiB."""
        content = self.stream._aiohttp_response.content
        watchdog = _ReadWatchdog.replacing(content._protocol)
        pending: list[bytes] = []
        try:
            with map_aiohttp_exceptions():
                async for chunk in content.iter_any():
                    if watchdog is not None:
                        watchdog.reads += 1
                    start = 0
                    while (end := chunk.find(b"\n", start)) >= 0:
                        if pending:
                            pending.append(chunk[start:end])
                            yield b"".join(pending)
                            pending.clear()
                        else:
                            yield chunk[start:end]
                        start = end + 1
                    if start < len(chunk):
                        pending.append(chunk[start:])
        except httpx2.ConnectTimeout as exc:
            raise self._about_request(_told_apart(exc)) from exc.__cause__
        except httpx2.RequestError as exc:
            self._about_request(exc)  # the SDK's mapping reads the error's request
            raise
        finally:
            if watchdog is not None:
                watchdog.stop()
        if pending:
            yield b"".join(pending)

    def _about_request(self, exc: httpx2.RequestError) -> httpx2.RequestError:
        if exc._request is None:
            exc.request = self.request
        return exc


class _ReadWatchdog:
    """aiohttp's read timeout (`sock_read`) for a long stream, without its timer per chunk.

    aiohttp cancels and re-arms a timer on every chunk it receives: a tenth of a streamed
    chunk's cost in the worker. This looks a quarter of the timeout at a time instead and
    counts the reads in between; after a whole timeout without one (to within a quarter) it
    times the read out as aiohttp would (the SDK's "did not answer in time").
    """

    LOOKS = 4

    def __init__(self, protocol, timeout: float) -> None:
        self.protocol = protocol
        self.reads = 0
        self.seen = 0
        self.quiet = 0
        self.step = timeout / self.LOOKS
        self.loop = asyncio.get_running_loop()
        self.handle: asyncio.TimerHandle | None = self.loop.call_later(self.step, self.look)

    @classmethod
    def replacing(cls, protocol) -> _ReadWatchdog | None:
        """Take over the read timeout aiohttp set for this response, if any."""
        timeout = protocol.read_timeout
        if not timeout:
            return None
        protocol.read_timeout = None  # aiohttp sets it again for the connection's next request
        protocol._drop_timeout()
        return cls(protocol, timeout)

    def look(self) -> None:
        if self.reads != self.seen:
            self.seen, self.quiet = self.reads, 0
        else:
            self.quiet += 1
        if self.quiet >= self.LOOKS:
            self.handle = None
            self.protocol._on_read_timeout()
            return
        self.handle = self.loop.call_later(self.step, self.look)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


def response_lines(response) -> AsyncIterator[bytes]:
    """The lines of an SDK's streaming response (`with_streaming_response`), as bytes: read
    straight from aiohttp where the body is not compressed (an SSE stream never is, in
    practice), else through the SDK, which decodes it."""
    http = response.http_response
    stream = http.stream
    if isinstance(stream, httpx2._client.BoundAsyncStream):  # the client's timing wrapper
        stream = stream._stream
    if isinstance(stream, _TellingApart) and http.headers.get("content-encoding", "identity") in (
        "",
        "identity",
    ):
        return stream.lines()
    return _encoded(response.iter_lines())


async def _encoded(lines: AsyncIterator[str]) -> AsyncIterator[bytes]:
    async for line in lines:
        yield line.encode()


def _told_apart(exc: httpx2.ConnectTimeout) -> httpx2.TransportError:
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ServerTimeoutError) or not isinstance(
        cause, aiohttp.ClientConnectionError
    ):
        return exc
    if isinstance(cause, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(str(cause))
    return httpx2.ReadError(str(cause))  # the connection dropped, mid-request or mid-stream


def aiohttp_session() -> aiohttp.ClientSession | None:
    """The running loop's shared session where the loop keeps its clients, else None (a
    client then makes a session of its own, closed with it)."""
    loop = asyncio.get_running_loop()
    if loop not in _kept:
        return None
    session = _sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS)
        session = _sessions[loop] = aiohttp.ClientSession(connector=connector, trust_env=True)
    return session


def aiohttp_transport() -> httpx2.AsyncBaseTransport:
    """The transport for an SDK's `DefaultAioHttpClient(transport=…)`: over the loop's shared
    session, or a session of the client's own, closed with it."""
    return _Transport(aiohttp_session())


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
