"""Built-in tools through the emulator's scripted tool calls, permissions checked when run."""

from __future__ import annotations

import pytest

from apps.chat.council.posting import message_post
from apps.chat.council.tools import ToolContext, ToolRefused, run_tool, tool_definitions
from apps.chat.display.bubbles import render_bubbles
from apps.chat.models import Session, Thread
from apps.chat.records.sessions import session_set_memory
from apps.providers.emulator import Script
from apps.providers.types import ToolCall
from tests.conftest import wait_settled


def tool_then_text(handle: str, name: str, arguments: dict, text: str) -> list[Script]:
    cue = f"You are @{handle} "
    return [
        Script(text="", tool_calls=[{"name": name, "arguments": arguments}], match=cue),
        Script(text=text, match=cue),
    ]


def tool_results(reply) -> list[dict]:
    return [part for part in reply.content if part["type"] == "tool_result"]


@pytest.mark.django_db
def test_every_role_is_offered_the_same_tools():
    names = [definition.name for definition in tool_definitions()]
    assert names == sorted(
        ["library_search", "list_files", "list_roles", "read_file", "read_files", "read_memory",
         "read_messages",
         "rename_thread",
         "search_files", "search_transcript", "suggest_route", "thread_info", "update_memory",
         "write_file"]
    )  # fmt: skip
    assert "update_memory" not in [d.name for d in tool_definitions(disabled=["update_memory"])]


@pytest.mark.django_db(transaction=True)
def test_a_read_tool_feeds_the_model(alice, anthropic_thread, celery_worker, emulator):
    session = anthropic_thread.session
    session_set_memory(session=session, memory="The film is called Blue Hour.")
    emulator.script(
        *tool_then_text("visual_architect", "read_memory", {}, "Blue Hour it is."),
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="@visual_architect title?")
    (reply,) = wait_settled(posted.replies)
    assert reply.status == "done" and reply.text == "Blue Hour it is."
    (result,) = tool_results(reply)
    assert result["content"] == "The film is called Blue Hour." and not result["is_error"]
    # The model received the result in its second request.
    assert "The film is called Blue Hour." in str(emulator.requests[-1].body["messages"])
    html = render_bubbles([reply])
    assert "read_memory" in html  # tool activity is visible in the bubble


@pytest.mark.django_db(transaction=True)
def test_a_write_tool_changes_the_session(alice, anthropic_thread, celery_worker, emulator):
    emulator.script(
        *tool_then_text(
            "assistant", "update_memory", {"text": "Shoot in Lisbon.", "mode": "append"}, "Saved."
        ),
        *tool_then_text("assistant", "rename_thread", {"label": "Lisbon shoot"}, "Renamed."),
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="remember Lisbon")
    wait_settled(posted.replies)
    assert Session.objects.get(pk=anthropic_thread.session_id).memory == "Shoot in Lisbon."
    posted = message_post(thread=anthropic_thread, author=alice, text="name this thread")
    wait_settled(posted.replies)
    assert Thread.objects.get(pk=anthropic_thread.pk).label == "Lisbon shoot"


@pytest.mark.django_db(transaction=True)
def test_a_role_without_write_permission_is_refused_and_nothing_changes(
    alice, anthropic_thread, celery_worker, emulator
):
    session_set_memory(session=anthropic_thread.session, memory="Keep me.")
    emulator.script(
        *tool_then_text(
            "sound_designer", "update_memory", {"text": "Overwritten", "mode": "replace"}, "Oh."
        )
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="@sound_designer hi")
    (reply,) = wait_settled(posted.replies)
    (result,) = tool_results(reply)
    assert result["is_error"]
    assert "may not use update_memory" in result["content"]
    assert Session.objects.get(pk=anthropic_thread.session_id).memory == "Keep me."
    assert reply.status == "done"  # the model read the refusal and answered


@pytest.mark.django_db(transaction=True)
def test_suggest_route_becomes_a_button_that_prefills_the_composer(
    alice, anthropic_thread, celery_worker, emulator
):
    arguments = {"handle": "sound_designer", "message": "What does the harbour <b>sound</b> like?"}
    emulator.script(*tool_then_text("assistant", "suggest_route", arguments, "Ask them!"))
    posted = message_post(thread=anthropic_thread, author=alice, text="harbour sounds?")
    (reply,) = wait_settled(posted.replies)
    html = render_bubbles([reply])
    assert (
        'data-prefill="@sound_designer What does the harbour &lt;b&gt;sound&lt;/b&gt; like?"'
        in html
    )
    assert "Ask @sound_designer" in html


@pytest.mark.django_db
def test_tool_arguments_are_validated(alice_thread):
    session = alice_thread.session
    context = ToolContext(session.pk, alice_thread.pk, 0, "assistant", can_write=True)
    with pytest.raises(ValueError, match="not a role of this chat"):
        run_tool(context, ToolCall("1", "suggest_route", {"handle": "nobody", "message": "hi"}))
    with pytest.raises(ValueError, match="non-empty string"):
        run_tool(context, ToolCall("2", "rename_thread", {"label": "  "}))
    with pytest.raises(ToolRefused, match="no tool named"):
        run_tool(context, ToolCall("3", "format_disk", {}))
    session.disabled_tools = ["read_memory"]
    session.save()
    with pytest.raises(ToolRefused):
        run_tool(context, ToolCall("4", "read_memory", {}))
    message_post(thread=alice_thread, author=alice_thread.session.owner, text="the harbour at dawn")
    found = run_tool(context, ToolCall("5", "search_transcript", {"query": "HARBOUR"}))
    assert "[User]: the harbour at dawn" in found


def test_read_messages_reads_several_in_one_call_by_message_number(alice_thread):
    from apps.chat.models import Message

    posted = message_post(thread=alice_thread, author=alice_thread.session.owner, text="first")
    Message.objects.filter(pk=posted.replies[0].pk).update(
        status="done", content=[{"type": "text", "text": "An answer."}]
    )
    context = ToolContext(alice_thread.session_id, alice_thread.pk, 0, "assistant", False)
    read = ToolCall(id="t1", name="read_messages", arguments={"numbers": [1, "#2", 99]})
    expected = "#1 [User]:\nfirst\n\n#2 [Assistant]:\nAn answer.\n\n"
    assert run_tool(context, read) == expected + "#99: no such message in this thread."
    for bad in ([], ["one"], [0], [True]):
        with pytest.raises(ValueError, match="message number"):
            run_tool(context, ToolCall(id="t2", name="read_messages", arguments={"numbers": bad}))
