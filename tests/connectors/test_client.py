"""The MCP client against real servers built with the SDK: list, call, errors, timeouts,
a server that dies mid-call, and one that is not there."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from pathlib import Path

import anyio
import pytest

from apps.connectors.client import (
    McpUnavailable,
    ServerSpec,
    _cause,
    _guarded,
    _reason,
    call_tool,
    list_tools,
    namespaced,
)


async def test_stdio_lists_tools_with_their_read_only_hints_and_calls_them(stdio_spec):
    tools = {tool.name: tool for tool in await list_tools(stdio_spec)}
    assert tools["echo"].read_only and not tools["add_note"].read_only
    assert tools["echo"].schema["properties"]["text"]["type"] == "string"
    assert await call_tool(stdio_spec, "echo", {"text": "hi"}) == ("echo: hi", False)


async def test_stdio_runs_in_the_workspace_and_gets_it_as_its_root(stdio_spec):
    workspace = Path(stdio_spec.workspace)
    text, _ = await call_tool(stdio_spec, "add_note", {"text": "harbour"})
    assert text == f"noted in {workspace.resolve()}"
    assert (workspace / "notes.txt").read_text() == "harbour\n"
    assert await call_tool(stdio_spec, "roots", {}) == (workspace.resolve().as_uri(), False)


async def test_stdio_servers_get_their_own_environment_not_parleys(stdio_spec, monkeypatch):
    monkeypatch.setenv("PARLEY_ENCRYPTION_KEYS", "secret-of-parley")
    spec = dataclasses.replace(stdio_spec, env={**stdio_spec.env, "API_TOKEN": "t0k"})
    assert await call_tool(spec, "has_env", {"name": "API_TOKEN"}) == ("set", False)
    assert await call_tool(spec, "has_env", {"name": "PARLEY_ENCRYPTION_KEYS"}) == ("unset", False)


async def test_a_tool_error_a_timeout_and_a_crash_are_reported_not_raised_past_the_client(
    stdio_spec,
):
    text, failed = await call_tool(stdio_spec, "fail", {})
    assert failed and "the tool broke on purpose" in text
    quick = dataclasses.replace(stdio_spec, timeout=1)
    with pytest.raises(
        McpUnavailable, match=r"'local' is unavailable: it did not answer within 1 s\.$"
    ):
        await call_tool(quick, "slow", {"seconds": 5})
    with pytest.raises(McpUnavailable, match="'local' went away during the call"):
        await call_tool(stdio_spec, "crash", {})
    missing = dataclasses.replace(stdio_spec, command="/nonexistent/mcp-server")
    with pytest.raises(McpUnavailable, match="unavailable"):
        await list_tools(missing)


def test_a_timeout_hidden_behind_the_sdks_teardown_is_still_said_as_one(stdio_spec):
    """Under load the SDK's read timeout can surface only as the context of what closing its
    streams raised — a cancelled scope under a broken stream, in a group. Seen once in CI as
    "unavailable: Cancelled via cancel scope 7ff7…"; the person must read the timeout."""
    timeout = RuntimeError("Timed out while waiting for response to ClientRequest. Waited 1.0 s")
    cancelled = asyncio.CancelledError("Cancelled via cancel scope 7ff7721a0b80")
    cancelled.__context__ = timeout
    broken = anyio.BrokenResourceError()
    broken.__context__ = cancelled
    failure = BaseExceptionGroup("unhandled errors in a TaskGroup", [broken])
    quick = dataclasses.replace(stdio_spec, timeout=1)
    assert _reason(failure, quick) == "it did not answer within 1 s"
    assert _reason(_cause(broken), quick) == "it did not answer within 1 s"


async def test_a_call_that_fails_after_its_whole_timeout_is_said_as_a_timeout(stdio_spec):
    """Under load the SDK can end a timed-out call with only its teardown's errors (a broken
    stream in a group, no timeout in sight): after the whole timeout, that is a timeout."""
    quick = dataclasses.replace(stdio_spec, timeout=1)

    async def fails_late(session):
        await asyncio.sleep(1.05)
        raise BaseExceptionGroup("unhandled errors in a TaskGroup", [anyio.BrokenResourceError()])

    with pytest.raises(McpUnavailable, match=r"unavailable: it did not answer within 1 s\.$"):
        await _guarded(quick, fails_late)


async def test_streamable_http_lists_and_calls(mcp_http):
    spec = ServerSpec(name="remote", kind="http", url=mcp_http.url, timeout=10)
    assert "echo" in {tool.name for tool in await list_tools(spec)}
    assert await call_tool(spec, "echo", {"text": "over http"}) == ("echo: over http", False)


async def test_an_unreachable_or_refusing_http_server_is_a_clear_message(mcp_http):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    nobody = ServerSpec(name="gone", kind="http", url=f"http://127.0.0.1:{closed_port}/mcp",
                        timeout=3)  # fmt: skip
    with pytest.raises(McpUnavailable, match="'gone' is unavailable"):
        await list_tools(nobody)
    wrong_path = ServerSpec(name="wrong", kind="http", url=mcp_http.url + "-nothing", timeout=3)
    with pytest.raises(McpUnavailable, match="'wrong' is unavailable"):
        await list_tools(wrong_path)


def test_tool_names_are_namespaced_and_provider_safe():
    assert namespaced("files", "read") == "files__read"
    assert namespaced("my server", "do.it!") == "my_server__do_it_"
    assert len(namespaced("s" * 40, "t" * 60)) == 64


def test_a_failure_is_named_by_its_cause_not_by_the_streams_closing_after_it():
    """Closing the SDK's streams after a timeout can raise BrokenResourceError (seen on a busy
    machine): the person reads about the timeout, not the teardown."""
    import anyio

    from apps.connectors.client import _cause, _connection_lost, _reason

    spec = ServerSpec(name="local", kind="stdio", timeout=1)
    try:
        try:
            raise RuntimeError(
                "Timed out while waiting for response to ClientRequest. Waited 1.0 seconds."
            )
        except RuntimeError:
            raise BaseExceptionGroup("teardown", [anyio.BrokenResourceError()]) from None
    except BaseExceptionGroup as exc:
        # `from None` hides the context from tracebacks, not from __context__.
        cause = _cause(exc)
    assert _reason(cause, spec) == "it did not answer within 1 s"
    assert not _connection_lost(cause)
    assert _connection_lost(_cause(BaseExceptionGroup("gone", [anyio.BrokenResourceError()])))
