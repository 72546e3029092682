"""Talking to MCP servers through the official SDK: list their tools, call one.

A connection is opened for each call and closed after it, inside the calling task: the
SDK's transports hold anyio task groups that must close where they opened, and a round's
tool calls run as separate tasks. Every failure — unreachable, refused, crashed, too slow —
becomes an `McpUnavailable` with a message a person or a model can read; nothing here blocks
past the server's timeout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK (~13 MB) is imported by the first call, not by every process
    from mcp import ClientSession, types

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 200_000
LIVENESS_PING_SECONDS = 1.0
TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


class McpUnavailable(Exception):
    """The server could not be reached or did not answer in time."""


@dataclass(frozen=True)
class ServerSpec:
    """Everything needed to reach one server (secrets decrypted, for the call only)."""

    name: str
    kind: str  # "stdio" | "http"
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 20.0
    workspace: str = ""  # stdio servers run there and get it as their root


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "schema": self.schema,
                "read_only": self.read_only}  # fmt: skip


def namespaced(server: str, tool: str) -> str:
    """The name a model sees: `server__tool`, within the providers' 64-character limit."""
    return f"{TOOL_NAME.sub('_', server)}__{TOOL_NAME.sub('_', tool)}"[:64]


def _roots_callback(workspace: str):
    from mcp import types

    async def list_roots(context) -> types.ListRootsResult:
        root = types.Root(uri=Path(workspace).resolve().as_uri(), name="session workspace")  # type: ignore[arg-type]
        return types.ListRootsResult(roots=[root])

    return list_roots if workspace else None


@asynccontextmanager
async def _session(spec: ServerSpec) -> AsyncIterator[ClientSession]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamablehttp_client

    timeout = timedelta(seconds=spec.timeout)
    if spec.kind == "stdio":
        if spec.workspace:
            Path(spec.workspace).mkdir(parents=True, exist_ok=True)
        parameters = StdioServerParameters(
            command=spec.command,
            args=list(spec.args),
            env={**_base_env(), **spec.env},
            cwd=spec.workspace or None,
        )
        with open(os.devnull, "w") as errlog:  # a chatty server must not fill the worker's log
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                ClientSession(
                    read, write, read_timeout_seconds=timeout,
                    list_roots_callback=_roots_callback(spec.workspace),
                ) as session,
            ):  # fmt: skip
                await session.initialize()
                yield session
        return
    async with (
        streamablehttp_client(spec.url, headers=spec.headers or None, timeout=spec.timeout)
        as (read, write, _),
        ClientSession(read, write, read_timeout_seconds=timeout) as session,
    ):  # fmt: skip
        await session.initialize()
        yield session


def _base_env() -> dict[str, str]:
    """What a stdio server inherits: enough to start a program, none of Parley's secrets."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH")
    return {name: os.environ[name] for name in keep if name in os.environ}


def _reason(exc: BaseException, spec: ServerSpec) -> str:
    if _timed_out(exc):
        return _timeout_reason(spec)
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(_reason(inner, spec) for inner in exc.exceptions))
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300].rstrip(".")


def _timeout_reason(spec: ServerSpec) -> str:
    return f"it did not answer within {spec.timeout:g} s"


def _timed_out(exc: BaseException | None, seen: set[int] | None = None) -> bool:
    """Whether a timeout is anywhere in what went wrong: closing the SDK's streams and task
    groups after one can raise errors of their own (a broken stream, a cancelled scope) that
    would otherwise be the reason shown."""
    seen = set() if seen is None else seen
    if exc is None or id(exc) in seen:
        return False
    seen.add(id(exc))
    if isinstance(exc, TimeoutError) or "Timed out while waiting" in str(exc):
        return True
    inner = list(exc.exceptions) if isinstance(exc, BaseExceptionGroup) else []
    return any(_timed_out(other, seen) for other in [*inner, exc.__context__, exc.__cause__])


def _teardown_only(exc: BaseException) -> bool:
    import anyio

    if isinstance(exc, BaseExceptionGroup):
        return all(_teardown_only(inner) for inner in exc.exceptions)
    return isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError)


def _cause(exc: BaseException) -> BaseException:
    """What went wrong first: closing the SDK's streams after a failure (a timeout, say) can
    raise its own BrokenResourceError, which would otherwise hide the failure."""
    while _teardown_only(exc) and exc.__context__ is not None:
        exc = exc.__context__
    return exc


def _connection_lost(exc: BaseException) -> bool:
    """Whether the failure is the server going away (a closed pipe or connection)."""
    import anyio
    import httpx

    if isinstance(exc, BaseExceptionGroup):
        return any(_connection_lost(inner) for inner in exc.exceptions)
    lost = (httpx.TransportError, anyio.BrokenResourceError, anyio.ClosedResourceError,
            ConnectionError, EOFError)  # fmt: skip
    return isinstance(exc, lost) or "Connection closed" in str(exc)


async def _guarded(spec: ServerSpec, work):
    outcome: list[Any] = []
    connected = False
    started = time.monotonic()
    try:
        async with asyncio.timeout(spec.timeout + 5):
            async with _session(spec) as session:
                connected = True
                outcome.append(await work(session))
    except asyncio.CancelledError:
        raise
    except McpUnavailable:
        raise
    except (Exception, BaseExceptionGroup) as exc:
        if outcome:
            # The answer arrived; only closing the connection failed (servers that use roots
            # often send one last message as the SDK shuts its streams). The tool did run.
            log.info("MCP server %r did not close cleanly: %s", spec.name, _reason(exc, spec))
            return outcome[0]
        # A call that failed after its whole timeout did not answer within it, whatever the
        # SDK raised on the way out (under load, a cancelled scope with no timeout in sight).
        if _timed_out(exc) or time.monotonic() - started >= spec.timeout:
            raise McpUnavailable(
                f"The MCP server {spec.name!r} is unavailable: {_timeout_reason(spec)}."
            ) from exc
        cause = _cause(exc)
        if connected and _connection_lost(cause):
            raise McpUnavailable(
                f"The MCP server {spec.name!r} went away during the call ({_reason(cause, spec)})."
            ) from exc
        raise McpUnavailable(
            f"The MCP server {spec.name!r} is unavailable: {_reason(cause, spec)}."
        ) from exc
    return outcome[0]


async def _while_alive(spec: ServerSpec, session: ClientSession, request):
    """Await a request, pinging an HTTP server meanwhile: one that dies mid-call leaves the
    SDK waiting for an answer on a stream that ended, until the timeout; a failed ping ends
    the session at once. (A stdio server's death closes its pipe, which the SDK notices.)"""
    task = asyncio.ensure_future(request)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=LIVENESS_PING_SECONDS)
            if done:
                return task.result()
            if spec.kind == "http":
                async with asyncio.timeout(spec.timeout):
                    await session.send_ping()
    finally:
        task.cancel()


async def list_tools(spec: ServerSpec) -> list[ListedTool]:
    async def work(session: ClientSession) -> list[ListedTool]:
        listed = await session.list_tools()
        return [
            ListedTool(
                name=tool.name,
                description=(tool.description or "")[:1000],
                schema=tool.inputSchema or {"type": "object", "properties": {}},
                read_only=bool(tool.annotations and tool.annotations.readOnlyHint),
            )
            for tool in listed.tools
        ]

    return await _guarded(spec, work)


async def call_tool(spec: ServerSpec, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """The tool's text output and whether the server flagged it as an error."""

    from mcp import types

    async def work(session: ClientSession) -> tuple[str, bool]:
        result = await _while_alive(
            spec,
            session,
            session.call_tool(
                tool, arguments, read_timeout_seconds=timedelta(seconds=spec.timeout)
            ),
        )
        pieces = []
        for item in result.content:
            if isinstance(item, types.TextContent):
                pieces.append(item.text)
            else:
                pieces.append(f"[{item.type} content]")
        if not pieces and result.structuredContent is not None:
            pieces.append(str(result.structuredContent))
        return "\n".join(pieces)[:MAX_RESULT_CHARS], bool(result.isError)

    return await _guarded(spec, work)
