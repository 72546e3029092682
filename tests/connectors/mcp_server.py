"""A real MCP server for the tests, built with the SDK's own server class.

`python -m tests.connectors.mcp_server` serves it over stdio; `http_app()` gives its
streamable HTTP application.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True)
server = FastMCP("parley-test")


@server.tool(annotations=READ_ONLY, description="Say the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Append a line to notes.txt in the working directory.")
def add_note(text: str) -> str:
    with Path("notes.txt").open("a", encoding="utf-8") as notes:
        notes.write(text + "\n")
    return f"noted in {os.getcwd()}"


@server.tool(annotations=READ_ONLY, description="The client's roots.")
async def roots(ctx: Context) -> str:
    listed = await ctx.session.list_roots()
    return " ".join(str(root.uri) for root in listed.roots)


@server.tool(annotations=READ_ONLY, description="Wait, then answer.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "finally"


@server.tool(annotations=READ_ONLY, description="Fail with an error.")
def fail() -> str:
    raise ValueError("the tool broke on purpose")


@server.tool(annotations=READ_ONLY, description="Die mid-call.")
def crash() -> str:
    os._exit(3)


@server.tool(annotations=READ_ONLY, description="Report an environment variable's presence.")
def has_env(name: str) -> str:
    return "set" if os.environ.get(name) else "unset"


def http_app():
    return server.streamable_http_app()


if __name__ == "__main__":
    server.run("stdio")
