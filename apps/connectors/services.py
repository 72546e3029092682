"""Saving and testing MCP servers; the spec a reply's tool call connects with."""

from __future__ import annotations

import asyncio
import re
import tempfile
import threading

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from apps.connectors.client import ListedTool, McpUnavailable, ServerSpec, list_tools
from apps.connectors.models import McpServer, ServerKind
from apps.connectors.safety import check_server_url

HEADER_LINE = re.compile(r"^([A-Za-z0-9-]{1,80})\s*:\s*(.{0,4000})$")


def parse_pairs(text: str, *, separator: str, what: str) -> dict[str, str]:
    """`Name: value` (headers) or `NAME=value` (environment) lines, blank lines ignored."""
    pairs: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        name, found, value = line.partition(separator)
        if not found or not name.strip() or (separator == ":" and not HEADER_LINE.match(line)):
            raise ValidationError(f"Line {number} of the {what} is not `name{separator}value`.")
        pairs[name.strip()] = value.strip()
    return pairs


def server_spec(server: McpServer, *, workspace: str = "") -> ServerSpec:
    """How to reach the server now (an HTTP URL is checked again: DNS may have changed)."""
    if server.kind == ServerKind.HTTP:
        check_server_url(server.url)
    return ServerSpec(
        name=server.name,
        kind=server.kind,
        command=server.command,
        args=tuple(str(arg) for arg in server.args or ()),
        env=server.env() if server.kind == ServerKind.STDIO else {},
        url=server.url,
        headers=server.headers() if server.kind == ServerKind.HTTP else {},
        timeout=float(server.timeout_seconds),
        workspace=workspace if server.kind == ServerKind.STDIO else "",
    )


def server_save_http(
    *, owner, name: str, url: str, headers_text: str = "", server: McpServer | None = None
) -> McpServer:
    """Create or change a user's streamable HTTP server; blank headers keep the saved ones."""
    url = check_server_url(url)
    name = name.strip().lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,39}", name):
        raise ValidationError("Name it with lowercase letters, digits, '-' or '_' (40 at most).")
    server = server or McpServer(owner=owner, kind=ServerKind.HTTP)
    server.name, server.url = name, url
    if headers_text.strip():
        server.set_headers(parse_pairs(headers_text, separator=":", what="headers"))
    try:
        with transaction.atomic():  # a savepoint: a duplicate name must not spoil the caller's
            server.save()
    except IntegrityError:
        raise ValidationError(f"You already have a server called {name!r}.") from None
    return server


def server_test(*, server: McpServer) -> list[ListedTool]:
    """Connect, list the server's tools and remember them (or the reason it failed).

    A stdio server is tested the way a reply calls it, in a workspace it gets as its root:
    servers that use roots offer more tools then, and fail differently.
    """
    outcome: dict[str, object] = {}
    scratch = tempfile.TemporaryDirectory(prefix="parley-mcp-test-")
    spec = server_spec(server, workspace=scratch.name)

    def run() -> None:  # a fresh event loop, whatever the calling thread runs
        try:
            outcome["tools"] = asyncio.run(list_tools(spec))
        except McpUnavailable as exc:
            outcome["error"] = str(exc)
        finally:
            scratch.cleanup()

    thread = threading.Thread(target=run, name=f"mcp-test-{server.pk}")
    thread.start()
    thread.join(spec.timeout + 10)
    error = str(outcome.get("error", "")) or ("" if "tools" in outcome else "No answer in time.")
    tools: list[ListedTool] = outcome.get("tools", [])  # type: ignore[assignment]
    server.last_error = error
    if not error:
        server.tools = [tool.as_dict() for tool in tools]
    server.save(update_fields=["last_error", "tools"])
    if error:
        raise McpUnavailable(error)
    return tools
