"""A reply's event log: its life from queued to settled — a retry and why, tool calls and
results by size, a continuation, its end — written with its final state (never per token),
shown in the bubble's Details and in the admin."""

from __future__ import annotations

import pytest

from apps.chat.council.posting import message_post
from apps.chat.display.bubbles import render_bubbles
from apps.providers.emulator import Script
from tests.conftest import wait_settled

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_replys_log_tells_its_retry_tools_continuation_and_end(
    alice, anthropic_thread, celery_worker, emulator, admin_client
):
    emulator.script(
        Script(status=529, error_type="overloaded_error", retry_after=0.2, provider="anthropic"),
        Script(
            tool_calls=[{"name": "search_transcript", "arguments": {"query": "harbour"}}],
            provider="anthropic",
        ),
        Script(text="The harbour at dawn, in one long", stop="max_tokens", provider="anthropic"),
        Script(text=" take.", provider="anthropic"),
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="@assistant the harbour?")
    (reply,) = wait_settled(posted.replies, timeout=30)
    events = [entry["event"] for entry in reply.log]
    assert events[0] == "started" and events[-1] == "done"
    for expected in ("retry", "tool_call", "tool_result", "first_token", "continuation"):
        assert expected in events, (expected, events)
    assert events.index("retry") < events.index("tool_call") < events.index("tool_result")
    retry = next(entry for entry in reply.log if entry["event"] == "retry")
    assert "overloaded_error" in retry["detail"]
    call = next(entry for entry in reply.log if entry["event"] == "tool_call")
    assert call["detail"] == "search_transcript" and call["size"] > 0
    times = [entry["t"] for entry in reply.log]
    assert times == sorted(times)

    html = str(render_bubbles([reply]))
    details = html[html.index('class="msg-details"') :]
    lines = [
        "queued", "sent to a worker", "retried: overloaded_error", "called search_transcript",
        "search_transcript returned", "continued: length limit", "done",
    ]  # fmt: skip
    for line in lines:
        assert line in details, line
    assert "from the cache" in details  # what the request used
    page = admin_client.get(f"/admin/chat/message/{reply.pk}/change/").content.decode()
    assert "search_transcript" in page and "overloaded_error" in page
