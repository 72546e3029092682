"""A lean Redis connection for the live path's two hot commands: a worker's publish of
streamed text and a web process's blocking read of the live bus.

Both run once a push at one stream, and a profile put most of a push's CPU in redis-py's
machinery around them (a pipeline object, a connection taken from and given back to the pool,
retries, response callbacks), not in Redis. Here a command is packed by hiredis, written to
one connection, and its reply is parsed by hiredis as the bytes arrive; replies resolve the
callers' futures in order, so several coroutines may pipeline on one connection. A lost
connection fails every waiting call with `ConnectionError` and the next call reconnects:
callers already treat a failed publish or read as "Redis is away" and retry.

Blocking commands (XREAD BLOCK) hold their connection: give them a `Wire` of their own.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import Any

import hiredis
from redis.asyncio.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

CONNECT_TIMEOUT_SECONDS = 5.0


class _Replies(asyncio.Protocol):
    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.reader = hiredis.Reader(encoding="utf-8", errors="surrogateescape")
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            waiter = self.waiting.popleft()
            if waiter.done():
                continue  # its caller gave up (cancelled): the reply is read and dropped
            if isinstance(reply, hiredis.ReplyError):
                waiter.set_exception(ResponseError(str(reply)))
            else:
                waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.wire.lost(self)
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():
                waiter.set_exception(RedisConnectionError(f"Redis closed the connection: {exc}"))


class Wire:
    """One Redis connection on the running event loop (see the module's notes)."""

    def __init__(self, url: str) -> None:
        self.options = parse_url(url)
        self.protocol: _Replies | None = None
        self.connecting: asyncio.Future[_Replies] | None = None

    async def call(self, *args: Any) -> Any:
        """Send one command and wait for its reply (a Redis error reply raises)."""
        protocol = self.protocol or await self._connect()
        waiter = asyncio.get_running_loop().create_future()
        protocol.waiting.append(waiter)
        protocol.transport.write(hiredis.pack_command(args))  # type: ignore[union-attr]
        return await waiter

    async def calls(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send several commands in one write; their replies, errors returned in place."""
        protocol = self.protocol or await self._connect()
        loop = asyncio.get_running_loop()
        waiters = [loop.create_future() for _ in commands]
        protocol.waiting.extend(waiters)
        protocol.transport.write(  # type: ignore[union-attr]
            b"".join(hiredis.pack_command(command) for command in commands)
        )
        return list(await asyncio.gather(*waiters, return_exceptions=True))

    def close(self) -> None:
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.close()
        self.protocol = None

    def lost(self, protocol: _Replies) -> None:
        if self.protocol is protocol:
            self.protocol = None

    async def _connect(self) -> _Replies:
        if self.connecting is None:
            self.connecting = asyncio.ensure_future(self._open())
        connecting = self.connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done():
                self.connecting = None

    async def _open(self) -> _Replies:
        loop = asyncio.get_running_loop()
        options = self.options
        try:
            if "path" in options:
                opening = loop.create_unix_connection(lambda: _Replies(self), options["path"])
            else:
                secure = options.get("connection_class") is SSLConnection  # rediss://
                opening = loop.create_connection(
                    lambda: _Replies(self), options.get("host", "localhost"),
                    options.get("port", 6379), ssl=ssl.create_default_context() if secure else None,
                )  # fmt: skip
            _, protocol = await asyncio.wait_for(opening, CONNECT_TIMEOUT_SECONDS)
        except (TimeoutError, OSError) as exc:
            raise RedisConnectionError(f"Could not reach Redis: {exc}") from exc
        self.protocol = protocol
        hello: list[tuple[Any, ...]] = []
        if options.get("password"):
            hello.append(("AUTH", *filter(None, (options.get("username"), options["password"]))))
        if options.get("db"):
            hello.append(("SELECT", options["db"]))
        for reply in await self.calls(hello) if hello else []:
            if isinstance(reply, Exception):
                self.close()
                raise reply
        return protocol
