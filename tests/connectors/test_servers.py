"""MCP servers in Parley: who may add and use them, secrets, the URL guard, per-session
selection, read-only versus write tools, and a role calling a tool on a real worker."""

from __future__ import annotations

import re
import sys

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from apps.chat.council.posting import message_post
from apps.chat.council.tools import (
    McpCall,
    ToolContext,
    ToolRefused,
    run_tool,
    session_tool_definitions,
)
from apps.connectors.client import McpUnavailable
from apps.connectors.models import McpServer, ServerKind
from apps.connectors.selectors import servers_for_user
from apps.connectors.services import server_save_http, server_test
from apps.providers.emulator import Script
from apps.providers.types import ToolCall
from tests.conftest import wait_settled
from tests.connectors.fixtures import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture
def local_urls(settings):
    settings.PARLEY_MCP_ALLOW_PRIVATE_URLS = True
    return settings


def staff_stdio_server(*users) -> McpServer:
    server = McpServer(
        name="local", kind=ServerKind.STDIO, command=sys.executable,
        args=["-m", "tests.connectors.mcp_server"], timeout_seconds=10,
    )  # fmt: skip
    server.set_env({"PYTHONPATH": str(ROOT), "SERVICE_TOKEN": "stdio-secret-value"})
    server.save()
    server.allowed_users.set(users)
    return server


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/mcp", "http://localhost/mcp", "http://10.1.2.3/mcp",
            "http://169.254.169.254/latest", "ftp://example.com/mcp", "not a url"],
)  # fmt: skip
def test_user_added_urls_may_not_reach_loopback_or_private_addresses(alice, url):
    with pytest.raises(ValidationError):
        server_save_http(owner=alice, name="sneaky", url=url)
    assert not McpServer.objects.exists()


def test_headers_are_encrypted_and_never_shown_back(alice, bob, local_urls, mcp_http):
    server = server_save_http(owner=alice, name="remote", url=mcp_http.url,
                              headers_text="Authorization: Bearer sk-mcp-very-secret")  # fmt: skip
    stored = McpServer.objects.values_list("headers_encrypted", flat=True).get(pk=server.pk)
    assert "sk-mcp-very-secret" not in stored
    assert server.headers() == {"Authorization": "Bearer sk-mcp-very-secret"}
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("connectors:server_list")).content.decode()
    assert "remote" in page and "Authorization" in page and "sk-mcp-very-secret" not in page
    client.force_login(bob)
    assert "remote" not in client.get(reverse("connectors:server_list")).content.decode()
    test_url = reverse("connectors:server_test", kwargs={"server": server.public_id})
    assert client.post(test_url).status_code == 404


def test_adding_testing_and_a_server_that_is_down(alice, local_urls, mcp_http):
    client = Client()
    client.force_login(alice)
    response = client.post(reverse("connectors:server_list"),
                           {"name": "remote", "url": mcp_http.url, "headers": ""})  # fmt: skip
    assert response.status_code == 302
    server = McpServer.objects.get(owner=alice)
    test_url = reverse("connectors:server_test", kwargs={"server": server.public_id})
    body = client.post(test_url).content.decode()
    text = re.sub(r"<[^>]+>", "", body)
    assert "Reachable" in text and "echo (read-only)" in text
    server.refresh_from_db()
    assert {tool["name"] for tool in server.tools} >= {"echo", "add_note"}
    McpServer.objects.filter(pk=server.pk).update(url="http://127.0.0.1:9/mcp")
    body = client.post(test_url).content.decode()
    assert "is unavailable" in body
    server.refresh_from_db()
    assert "unavailable" in server.last_error and server.tools  # the last good list is kept
    duplicate = client.post(reverse("connectors:server_list"),
                            {"name": "remote", "url": mcp_http.url})  # fmt: skip
    assert duplicate.status_code == 422 and "already have a server" in duplicate.content.decode()


def test_stdio_servers_are_for_the_users_staff_allowed(alice, bob):
    server = staff_stdio_server(alice)
    assert list(servers_for_user(user=alice)) == [server]
    assert list(servers_for_user(user=bob)) == []
    assert server.secret_names == ["PYTHONPATH", "SERVICE_TOKEN"]
    assert "stdio-secret-value" not in server.env_encrypted


def test_a_sessions_servers_offer_namespaced_tools_with_read_and_write_rights(alice, alice_thread):
    server = staff_stdio_server(alice)
    server_test(server=server)
    session = alice_thread.session
    before = [tool.name for tool in session_tool_definitions(session)]
    assert not any(name.startswith("local__") for name in before)
    session.mcp_servers.add(server)
    session.disabled_tools = ["local__crash"]
    session.save()
    names = [tool.name for tool in session_tool_definitions(session)]
    assert names[: len(before)] == before  # built-in tools first, unchanged: the cache holds
    assert names[len(before):] == sorted(  # then the server's, by name
        ["local__add_note", "local__echo", "local__fail", "local__has_env", "local__roots",
         "local__slow"]
    )  # fmt: skip

    def context(can_write):
        return ToolContext(session_id=session.pk, thread_id=alice_thread.pk, reply_pk=0,
                           role_handle="visual_architect", can_write=can_write)  # fmt: skip

    planned = run_tool(context(False), ToolCall("1", "local__echo", {"text": "hi"}))
    assert isinstance(planned, McpCall) and planned.tool == "echo"
    assert planned.spec.workspace.endswith(session.public_id.hex)
    with pytest.raises(ToolRefused, match="does not mark it read-only"):
        run_tool(context(False), ToolCall("2", "local__add_note", {"text": "x"}))
    assert isinstance(run_tool(context(True), ToolCall("3", "local__add_note", {"text": "x"})),
                      McpCall)  # fmt: skip
    with pytest.raises(ToolRefused, match="no tool named 'local__crash'"):
        run_tool(context(True), ToolCall("4", "local__crash", {}))
    session.mcp_servers.clear()
    with pytest.raises(ToolRefused, match="no tool named"):
        run_tool(context(True), ToolCall("5", "local__echo", {"text": "hi"}))


def test_the_settings_dialog_picks_servers_the_user_may_use(alice, bob, alice_thread):
    from apps.chat.web.forms import SessionSettingsForm
    from apps.providers.selectors import credentials_for_user

    mine = staff_stdio_server(alice)
    server_test(server=mine)
    session = alice_thread.session
    form = SessionSettingsForm(session=session, credentials=credentials_for_user(user=alice),
                               servers=servers_for_user(user=alice))  # fmt: skip
    assert ("local__echo", "local__echo") in form.tool_choices
    assert ("local__add_note", "local__add_note (write)") in form.tool_choices
    others = SessionSettingsForm(session=session, credentials=credentials_for_user(user=bob),
                                 servers=servers_for_user(user=bob))  # fmt: skip
    assert not list(others.fields["mcp_servers"].queryset)


@pytest.mark.django_db(transaction=True)
def test_a_role_calls_an_mcp_tool_and_a_dead_server_is_a_tool_error(
    alice, anthropic_thread, celery_worker, emulator
):
    server = staff_stdio_server(alice)
    server_test(server=server)
    session = anthropic_thread.session
    session.mcp_servers.add(server)
    call = {"name": "local__echo", "arguments": {"text": "harbour"}}
    emulator.script(
        Script(text="Let me check.", tool_calls=[call], provider="anthropic"),
        Script(text=" It echoed.", provider="anthropic", match="echo: harbour"),
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="@visual_architect echo")
    (reply,) = wait_settled(posted.replies, timeout=30)
    assert (reply.status, reply.text) == ("done", "Let me check. It echoed.")
    (result,) = [p for p in reply.content if p["type"] == "tool_result"]
    assert result["content"] == "echo: harbour" and not result["is_error"]
    # The server goes away: the call is a tool error the model reads; the reply finishes.
    McpServer.objects.filter(pk=server.pk).update(command="/nonexistent/mcp-server")
    emulator.script(
        Script(text="", tool_calls=[call], provider="anthropic"),
        Script(text="The tool server is down.", provider="anthropic", match="unavailable"),
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="@visual_architect again")
    (reply,) = wait_settled(posted.replies, timeout=30)
    assert (reply.status, reply.text) == ("done", "The tool server is down.")
    (result,) = [p for p in reply.content if p["type"] == "tool_result"]
    assert result["is_error"] and "'local' is unavailable" in result["content"]
    with pytest.raises(McpUnavailable):
        server.refresh_from_db()
        server_test(server=server)


def test_a_new_session_can_start_with_servers_the_user_may_use(alice, bob, roles):
    mine = staff_stdio_server(alice)
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("chat:session_list")).content.decode()
    assert "MCP servers" in page and "local" in page
    client.post(
        reverse("chat:session_create"), {"name": "With tools", "mcp_servers": [str(mine.public_id)]}
    )
    assert list(alice.chat_sessions.get(name="With tools").mcp_servers.all()) == [mine]
    client.force_login(bob)  # not allowed to use it: refused, with the reason, and no session
    response = client.post(
        reverse("chat:session_create"), {"name": "Sneaky", "mcp_servers": [str(mine.public_id)]}
    )
    assert response.status_code == 422 and "Select a valid choice" in response.content.decode()
    assert not bob.chat_sessions.filter(name="Sneaky").exists()


@pytest.mark.django_db(transaction=True)
def test_stop_ends_a_reply_waiting_on_a_slow_mcp_tool(
    alice, anthropic_thread, celery_worker, emulator
):

    from apps.chat.council.replies import thread_interrupt

    server = staff_stdio_server(alice)
    McpServer.objects.filter(pk=server.pk).update(timeout_seconds=60)
    server_test(server=server)
    anthropic_thread.session.mcp_servers.add(server)
    slow = {"name": "local__slow", "arguments": {"seconds": 50}}
    emulator.script(Script(text="Waiting on the server…", provider="anthropic", tool_calls=[slow]))
    posted = message_post(thread=anthropic_thread, author=alice, text="@visual_architect wait")
    from apps.chat.models import Message
    from tests.conftest import wait_until

    def calling() -> bool:
        reply = Message.objects.get(pk=posted.replies[0].pk)
        return any(part["type"] == "tool_call" for part in reply.content) or "Waiting" in reply.text

    wait_until(calling, timeout=20)  # the tool call is under way
    thread_interrupt(thread=anthropic_thread)
    # Settled well before the tool's own end (it waits 50 s): Stop did not wait for it.
    (reply,) = wait_settled(posted.replies, timeout=10)
    assert reply.status == "interrupted"
    assert reply.text.startswith("Waiting on the server")
