"""The reference MCP server (`@modelcontextprotocol/server-everything`, from npm) over stdio and
streamable HTTP: what a staff member's Test shows is what a role's call gets, and a role's call
succeeds over both — including over stdio with the session's workspace offered as a root,
which the server asks for and answers from."""

from __future__ import annotations

import pytest

from apps.chat.council.posting import message_post
from apps.connectors.client import ServerSpec, call_tool, list_tools
from apps.connectors.models import McpServer, ServerKind
from apps.connectors.services import server_save_http, server_test
from apps.providers.emulator import Script
from tests.conftest import wait_settled
from tests.connectors.fixtures import everything_command, start_everything_http


def stdio(workspace: str = "") -> ServerSpec:
    return ServerSpec(name="everything", kind="stdio", command=everything_command(),
                      args=("stdio",), timeout=15, workspace=workspace)  # fmt: skip


async def test_over_stdio_with_a_workspace_root_a_call_returns_its_result(tmp_path):
    workspace = tmp_path / "workspace"
    names = {tool.name for tool in await list_tools(stdio(str(workspace)))}
    assert {"get-sum", "echo", "get-roots-list"} <= names  # roots offered: roots tools too
    assert await call_tool(stdio(str(workspace)), "get-sum", {"a": 19, "b": 23}) == (
        "The sum of 19 and 23 is 42.", False,
    )  # fmt: skip
    text, is_error = await call_tool(stdio(str(workspace)), "get-roots-list", {})
    assert not is_error and workspace.resolve().as_uri() in text


async def test_over_http_a_call_returns_its_result_and_no_root_is_offered(everything_http):
    spec = ServerSpec(name="everything", kind="http", url=everything_http, timeout=15)
    names = {tool.name for tool in await list_tools(spec)}
    assert "get-sum" in names and "get-roots-list" not in names  # a path here means nothing there
    assert await call_tool(spec, "get-sum", {"a": 19, "b": 23}) == (
        "The sum of 19 and 23 is 42.", False,
    )  # fmt: skip


async def test_a_server_that_dies_mid_call_is_noticed_at_once_and_said_so(tmp_path):
    import asyncio

    from apps.connectors.client import McpUnavailable

    process, url = start_everything_http()
    spec = ServerSpec(name="everything", kind="http", url=url, timeout=20)
    long_call = ("trigger-long-running-operation", {"duration": 15, "steps": 5})

    async def kill_soon() -> None:
        await asyncio.sleep(1.5)
        process.kill()

    killer = asyncio.ensure_future(kill_soon())
    with pytest.raises(McpUnavailable) as failure:
        # A deadline short of the call's own 20 s timeout: the loss itself ended the call.
        await asyncio.wait_for(call_tool(spec, *long_call), 15)
    await killer
    process.wait(5)
    message = str(failure.value)
    assert message.startswith("The MCP server 'everything' went away during the call (")
    assert message.endswith(").") and ".." not in message


def sum_round_trip(thread, author, emulator, tool_name: str) -> None:
    call = {"name": tool_name, "arguments": {"a": 19, "b": 23}}
    emulator.script(
        Script(text="Adding.", tool_calls=[call], provider="anthropic"),
        Script(text=" It is 42.", provider="anthropic", match="The sum of 19 and 23 is 42."),
    )
    posted = message_post(thread=thread, author=author, text="@visual_architect add 19 and 23")
    (reply,) = wait_settled(posted.replies, timeout=40)
    (result,) = [part for part in reply.content if part["type"] == "tool_result"]
    assert (result["content"], result["is_error"]) == ("The sum of 19 and 23 is 42.", False)
    assert (reply.status, reply.text) == ("done", "Adding. It is 42.")


@pytest.mark.django_db(transaction=True)
def test_a_role_calls_the_reference_server_over_stdio_and_over_http(
    alice, anthropic_thread, celery_worker, emulator, everything_http, settings
):
    settings.PARLEY_MCP_ALLOW_PRIVATE_URLS = True
    local = McpServer.objects.create(name="everything", kind=ServerKind.STDIO,
                                     command=everything_command(), args=["stdio"],
                                     timeout_seconds=15)  # fmt: skip
    local.allowed_users.set([alice])
    listed = {tool.name for tool in server_test(server=local)}
    assert "get-roots-list" in listed  # Test runs it the way a reply does: with a root
    session = anthropic_thread.session
    session.mcp_servers.add(local)
    sum_round_trip(anthropic_thread, alice, emulator, "everything__get-sum")

    remote = server_save_http(owner=alice, name="remote", url=everything_http)
    server_test(server=remote)
    session.mcp_servers.set([remote])
    sum_round_trip(anthropic_thread, alice, emulator, "remote__get-sum")
