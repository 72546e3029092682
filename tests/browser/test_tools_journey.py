"""Tools as a person meets them: add an HTTP MCP server, give it to a session, watch a role
use it; upload a file and watch a role read it. Chromium, daphne, a worker, the emulator."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps.chat.records.sessions import session_create, session_set_provider
from apps.providers.emulator import Script
from tests.browser.test_group_chat import bubble, send, wait_done
from tests.browser.test_live_chat import log_in
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_mcp_tool_and_a_workspace_file_used_by_a_role(
    page,
    alice,
    roles,
    emulated_anthropic,
    emulator,
    mcp_http,
    settings,
):
    settings.PARLEY_MCP_ALLOW_PRIVATE_URLS = True  # the test server listens on loopback
    session = session_create(owner=alice, name="Harbour film")
    session_set_provider(session=session, credential=emulated_anthropic, model="claude-sonnet-5")
    log_in(page)

    # Add the server and test it.
    page.get_by_role("navigation", name="Account").get_by_role("link", name="MCP servers").click()
    page.get_by_label("Name (its tools are called name__tool)").fill("remote")
    page.get_by_label("URL").fill(mcp_http.url)
    page.get_by_role("button", name="Add server").click()
    page.get_by_role("button", name="Test remote").click()
    expect(page.get_by_role("status")).to_contain_text("Reachable", timeout=scaled(15_000))
    expect(page.get_by_role("status")).to_contain_text("echo (read-only)")

    # Give it to the session.
    page.goto(f"/t/{session.active_thread.public_id}/")
    page.get_by_role("button", name="Session settings").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("tab", name="Tools").click()
    dialog.get_by_role("checkbox", name="remote (Streamable HTTP)").check()
    expect(dialog.get_by_role("checkbox", name="remote__echo", exact=True)).to_be_checked()
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden(timeout=scaled(5_000))

    # A role uses its tool.
    emulator.script(
        Script(text="Let me ask the server.", provider="anthropic",
               tool_calls=[{"name": "remote__echo", "arguments": {"text": "harbour"}}]),
        Script(text=" It answered: echo: harbour.", provider="anthropic", match="echo: harbour"),
    )  # fmt: skip
    send(page, "@visual_architect try the echo tool")
    reply = bubble(page, "visual_architect")
    wait_done(reply, timeout=scaled(30_000))
    expect(reply.locator(".msg-tools")).to_contain_text("remote__echo")
    expect(reply).to_contain_text("It answered: echo: harbour.")

    # Upload a file and have a role read it.
    page.get_by_role("button", name="Files", exact=True).click()
    files = page.get_by_role("dialog", name="Files")
    scene = {"name": "scene.md", "mimeType": "text/markdown",
             "buffer": b"# Scene 2\nThe bell rings twice at dawn."}  # fmt: skip
    files.get_by_label("Choose files…").set_input_files(files=[scene])
    expect(files.get_by_role("table", name="Files in the workspace")).to_contain_text("scene.md")
    files.get_by_role("button", name="Close files").click()
    read = {"name": "read_file", "arguments": {"path": "scene.md"}}
    emulator.script(
        Script(text="none", provider="anthropic", match="Classify the shape"),  # the cheap model
        Script(text="", provider="anthropic", tool_calls=[read]),
        Script(text="The bell rings twice.", provider="anthropic", match="rings twice at dawn"),
    )
    send(page, "@sound_designer what does scene.md say about the bell?")
    sound = bubble(page, "sound_designer")
    wait_done(sound, timeout=scaled(30_000))
    expect(sound.locator(".msg-tools")).to_contain_text(re.compile(r"read_file.*scene\.md"))
    expect(sound).to_contain_text("The bell rings twice.")
