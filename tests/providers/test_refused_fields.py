"""Fields a real server refuses: the emulator refuses them as the server does (OpenAI's
reasoning models and `max_tokens`; a server that takes no `stream_options`), a kind's
description says so, and its adapter leaves them out, so a kind that passes here works for
real."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from apps.providers.adapters.openai import OPENAI_COMPATIBLE, OpenAIAdapter
from apps.providers.emulator import Script
from apps.providers.registry import DESCRIPTIONS, get_adapter
from apps.providers.types import ChatMessage, ChatRequest, ProviderError, Stop, TextDelta


def request(model: str) -> ChatRequest:
    return ChatRequest(
        model=model, system=(), max_tokens=512,
        messages=(ChatMessage("user", ({"type": "text", "text": "Hello"},)),),
    )  # fmt: skip


async def run(adapter, emulator, model: str) -> list:
    base = emulator.url + "/v1"
    return [event async for event in adapter.stream(request(model), api_key="k", base_url=base)]


def test_the_emulator_refuses_max_tokens_for_a_reasoning_model_as_openai_does(emulator):
    body = {"model": "o3-mini", "max_tokens": 10, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    answer = httpx.post(f"{emulator.url}/v1/chat/completions", json=body,
                        headers={"Authorization": "Bearer k"})  # fmt: skip
    assert answer.status_code == 400
    assert "Use 'max_completion_tokens' instead" in answer.json()["error"]["message"]


@pytest.mark.parametrize("model", ["o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "o1"])
async def test_openai_reasoning_models_get_max_completion_tokens(model, emulator):
    emulator.script(Script(text="Thought through."))
    events = await run(get_adapter("openai"), emulator, model)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Thought through."
    body = emulator.requests[-1].body
    assert body["max_completion_tokens"] == 512 and "max_tokens" not in body


async def test_other_openai_models_keep_max_tokens(emulator):
    await run(get_adapter("openai"), emulator, "gpt-4.1")
    assert emulator.requests[-1].body["max_tokens"] == 512


@pytest.mark.parametrize(
    "description",
    [d for d in DESCRIPTIONS if d.wire.startswith("openai") and d.refuses],
    ids=lambda d: d.kind,
)
async def test_every_kind_works_against_a_server_refusing_what_its_description_says(
    description, emulator
):
    emulator.refused_fields = [(p, name) for p, names in description.refuses for name in names]
    for prefix, _ in description.refuses:
        emulator.script(Script(text="Fine."))
        events = await run(get_adapter(description.kind), emulator, prefix + "-test")
        assert events[-1] == Stop("end")


async def test_a_description_that_says_stream_options_is_refused_leaves_it_out(emulator):
    emulator.refused_fields = [("", "stream_options")]  # a server that refuses it
    plain = OpenAIAdapter(OPENAI_COMPATIBLE)
    with pytest.raises(ProviderError, match="stream_options"):
        await run(plain, emulator, "llama3.1")
    told = OpenAIAdapter(
        dataclasses.replace(OPENAI_COMPATIBLE, refuses=(("", ("stream_options",)),))
    )
    emulator.script(Script(text="Works."))
    events = await run(told, emulator, "llama3.1")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Works."
    assert "stream_options" not in emulator.requests[-1].body
