"""Tools first, then one answer (issue 24, item 1): in a session set to it, a role gathers
with tools without writing, its stray prose is logged and kept out of the bubble, and one
synthesis request answers from an evidence pack instead of the raw tool traffic. Through the
worker, the Anthropic SDK and the emulator."""

from __future__ import annotations

import json

import pytest

from apps.chat.council.posting import message_post
from apps.chat.display.details import reply_details
from apps.chat.models import Session, ToolMode
from apps.chat.records.sessions import session_workspace
from apps.providers.emulator import Script
from apps.providers.tools_first import TOOL_PHASE_PROMPT
from tests.conftest import wait_settled

pytestmark = pytest.mark.django_db(transaction=True)
CUE = "You are @assistant "
FILES = {
    "scene.md": "The harbour scene opens at dawn, fog on the water.",
    "cast.md": "Mara, the harbour master, carries the lantern.",
    "sound.md": "Gulls, a distant bell, rope creaking against the pier.",
}
ANSWER = "Open on the fog at dawn [E1], Mara's lantern cutting through it [E2]."


@pytest.fixture
def research(anthropic_thread):
    session = anthropic_thread.session
    workspace = session_workspace(session)
    for path, text in FILES.items():
        workspace.write(path, text.encode())
    return anthropic_thread


def set_mode(thread, mode: str, *, disabled: list[str] | None = None) -> None:
    Session.objects.filter(pk=thread.session_id).update(
        tool_mode=mode, disabled_tools=disabled or []
    )


def body_text(recorded) -> str:
    return json.dumps(recorded.body, ensure_ascii=False)


def ask(thread, alice):
    (reply,) = wait_settled(
        message_post(
            thread=thread, author=alice, text="@assistant how does the scene open?"
        ).replies
    )
    return reply


def test_batch_tools_then_one_answer_from_the_evidence_pack(
    alice, research, emulator, celery_worker
):
    set_mode(research, ToolMode.TOOLS_FIRST)
    emulator.script(
        Script(text="Let me read the files first.", match=CUE,
               tool_calls=[{"name": "read_files", "arguments": {"paths": list(FILES)}}]),
        Script(text="DONE", match=CUE),
        Script(text=ANSWER, match=CUE),
    )  # fmt: skip
    reply = ask(research, alice)
    assert reply.status == "done" and reply.text == ANSWER
    assert "Let me read" not in json.dumps(reply.content)  # kept out of the bubble
    assert [part["name"] for part in reply.content if part["type"] == "tool_call"] == ["read_files"]
    gathering, done, synthesis = emulator.requests  # three round trips
    assert TOOL_PHASE_PROMPT in body_text(gathering) and TOOL_PHASE_PROMPT in body_text(done)
    # The synthesis request carries the evidence, labelled by call, and no raw tool traffic.
    last = synthesis.body["messages"][-1]["content"]
    pack = " ".join(block.get("text", "") for block in last)
    assert '[E1] read_files({"paths": ["scene.md", "cast.md", "sound.md"]})' in pack
    assert all(text in pack for text in FILES.values())
    assert "tool_use" not in body_text(synthesis) and "tool_result" not in body_text(synthesis)
    assert TOOL_PHASE_PROMPT not in body_text(synthesis)
    lines = [line for _, line in reply_details(reply)["timeline"]]
    assert any(line.startswith("prose held back: 1 tool round") and "Let me read the files" in line
               for line in lines), lines  # fmt: skip
    assert any(line.startswith("answered from the evidence: 1 results") for line in lines), lines


def test_without_the_batch_tool_the_same_task_takes_more_round_trips(
    alice, research, emulator, celery_worker
):
    set_mode(research, ToolMode.TOOLS_FIRST, disabled=["read_files"])
    emulator.script(
        *(
            Script(text="", match=CUE,
                   tool_calls=[{"name": "read_file", "arguments": {"path": path}}])
            for path in FILES
        ),
        Script(text="DONE", match=CUE),
        Script(text=ANSWER, match=CUE),
    )  # fmt: skip
    reply = ask(research, alice)
    assert reply.text == ANSWER
    assert len(emulator.requests) == 5  # against 3 with read_files
    pack = " ".join(
        b.get("text", "") for b in emulator.requests[-1].body["messages"][-1]["content"]
    )
    assert [f"[E{n}] read_file" in pack for n in (1, 2, 3)] == [True, True, True]
    assert "prose held back" not in json.dumps(reply.log)  # it wrote nothing while gathering


def test_as_it_goes_the_answer_request_carries_the_raw_results(
    alice, research, emulator, celery_worker
):
    set_mode(research, ToolMode.AS_IT_GOES)
    emulator.script(
        Script(text="Let me read the files first.", match=CUE,
               tool_calls=[{"name": "read_files", "arguments": {"paths": list(FILES)}}]),
        Script(text=ANSWER, match=CUE),
    )  # fmt: skip
    reply = ask(research, alice)
    assert reply.text.startswith("Let me read the files first.") and ANSWER in reply.text
    assert len(emulator.requests) == 2
    assert "tool_result" in body_text(emulator.requests[-1])
    assert TOOL_PHASE_PROMPT not in body_text(emulator.requests[0])


def test_a_reply_that_needs_no_tools_is_one_call_and_streams(
    alice, research, emulator, celery_worker
):
    set_mode(research, ToolMode.TOOLS_FIRST)
    long_answer = "No files are needed for this: the scene opens in fog. " * 12
    emulator.script(Script(text=long_answer, match=CUE, tokens_per_second=400))
    reply = ask(research, alice)
    assert reply.text == long_answer.strip() and len(emulator.requests) == 1
    assert "answered from the evidence" not in json.dumps(reply.log)
