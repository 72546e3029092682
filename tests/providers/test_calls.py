"""The robust call loop through real adapters and SDKs against the emulator."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from apps.providers.calls import converse
from apps.providers.emulator import Script
from apps.providers.registry import describe, get_adapter
from apps.providers.types import ProviderError, Stop, TextDelta, ToolCall, ToolResult, Usage
from tests.providers.test_adapters import PROVIDERS, WEATHER, base_url, request


class Sleeps(list):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


async def run(kind, emulator, req, **options):
    sleeps = Sleeps()
    events = [
        event
        async for event in converse(
            get_adapter(kind), req, api_key="k", base_url=base_url(emulator, kind),
            sleep=sleeps, **options,
        )
    ]  # fmt: skip
    return events, sleeps


def text_of(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_an_overload_before_any_text_is_retried(kind, emulator):
    emulator.script(Script(status=529 if kind == "anthropic" else 503), Script(text="Recovered."))
    events, sleeps = await run(kind, emulator, request())
    assert text_of(events) == "Recovered."
    assert len(emulator.requests) == 2 and len(sleeps) == 1


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_rate_limit_waits_as_long_as_retry_after_says(kind, emulator):
    emulator.script(
        Script(status=429, error_type="rate_limit_error", retry_after=3), Script(text="ok")
    )
    events, sleeps = await run(kind, emulator, request())
    assert sleeps == [3.0]
    assert text_of(events) == "ok"


async def test_a_permanent_error_is_not_retried(emulator):
    emulator.script(Script(status=400, error_type="invalid_request_error"))
    with pytest.raises(ProviderError):
        await run("anthropic", emulator, request())
    assert len(emulator.requests) == 1


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_an_error_after_text_keeps_the_text_and_is_not_retried(kind, emulator):
    emulator.script(Script(text="Some useful words, then trouble", error_after_chars=10))
    shown = []
    with pytest.raises(ProviderError, match="text so far is kept"):
        async for event in converse(
            get_adapter(kind), request(), base_url=base_url(emulator, kind)
        ):
            shown.append(event)
    assert text_of(shown).startswith("Some useful")
    assert len(emulator.requests) == 1


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_max_tokens_stop_is_continued_into_one_reply(kind, emulator):
    emulator.script(
        Script(text="The first half, ", stop="max_tokens"), Script(text="and the rest.")
    )
    events, _ = await run(kind, emulator, request())
    assert text_of(events) == "The first half, and the rest."
    assert events[-1] == Stop("end", continuations=1)
    follow_up = json.dumps(emulator.requests[1].body)
    assert "The first half" in follow_up and "Continue exactly where it stopped" in follow_up
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.output_tokens >= 2  # both calls counted


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_tool_round_trip_feeds_the_result_back(kind, emulator):
    emulator.script(
        Script(
            text="Checking.", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
        ),
        Script(text="It is snowing in Oslo.", match="Snow, -3"),
    )

    async def run_tool(call: ToolCall) -> str:
        assert call.arguments == {"city": "Oslo"}
        return "Snow, -3 °C"

    events, _ = await run(kind, emulator, request(tools=(WEATHER,)), run_tool=run_tool)
    assert text_of(events) == "Checking.It is snowing in Oslo."
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.name, r.content, r.is_error) for r in results] == [
        ("get_weather", "Snow, -3 °C", False)
    ]
    assert len(emulator.requests) == 2


async def test_a_failing_tool_returns_its_error_to_the_model_as_a_string(emulator):
    emulator.script(
        Script(text="", tool_calls=[{"name": "get_weather", "arguments": {}}]),
        Script(text="Sorry, I need a city.", match="Error: city is required"),
    )

    async def run_tool(call):
        raise ValueError("city is required")

    events, _ = await run("anthropic", emulator, request(tools=(WEATHER,)), run_tool=run_tool)
    assert [e.is_error for e in events if isinstance(e, ToolResult)] == [True]
    assert text_of(events) == "Sorry, I need a city."


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_at_the_tool_round_limit_the_role_answers_without_tools(kind, emulator):
    loop = Script(text="", tool_calls=[{"name": "get_weather", "arguments": {"city": "X"}}])
    emulator.script(loop, loop, loop, Script(text="From what I found: cold."))

    async def run_tool(call):
        return "again"

    events, _ = await run(
        kind, emulator, request(tools=(WEATHER,)), run_tool=run_tool, max_tool_rounds=2
    )
    assert len(emulator.requests) == 4  # two rounds, the call that asked for a third, the answer
    final = json.dumps(emulator.requests[-1].body)
    assert "Do not call tools now" in final
    text = text_of(events)
    assert text.startswith("*(Stopped using tools after 2 rounds") and text.endswith("cold.")
    assert isinstance(events[-1], Stop) and events[-1].reason == "end"


async def test_a_rounds_calls_run_together(emulator):
    import asyncio
    import time

    calls = [{"name": "get_weather", "arguments": {"city": c}} for c in ("Oslo", "Rome", "Lima")]
    emulator.script(Script(text="", tool_calls=calls), Script(text="Three cities."))
    spans: dict[str, tuple[float, float]] = {}

    async def run_tool(call):
        started = time.monotonic()
        await asyncio.sleep(0.3)
        spans[call.arguments["city"]] = (started, time.monotonic())
        return f"Weather in {call.arguments['city']}"

    events, _ = await run("anthropic", emulator, request(tools=(WEATHER,)), run_tool=run_tool)
    assert text_of(events) == "Three cities."
    # Every call started before any had finished: they overlapped.
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values())
    results = [e.content for e in events if isinstance(e, ToolResult)]
    assert results == ["Weather in Oslo", "Weather in Rome", "Weather in Lima"]  # call order


async def test_a_big_tool_result_is_trimmed_for_the_model_and_kept_whole(emulator):
    emulator.script(
        Script(text="", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]),
        Script(text="Snow in Oslo."),
    )
    lines = [f"Report {n}: sunny and dry in Lima, Peru." for n in range(400)]
    lines[250] = "Report 250: heavy snow in Oslo tonight."
    big = "\n".join(lines)

    async def run_tool(call):
        return big

    req = replace(request(tools=(WEATHER,)), metadata={"last_user_text": "Snow in Oslo?"})
    events, _ = await run("anthropic", emulator, req, run_tool=run_tool, result_round_chars=2000)
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == big and result.trimmed is not None
    sent = json.dumps(emulator.requests[1].body)
    assert "heavy snow in Oslo" in sent  # the relevant line survived
    assert "[Trimmed:" in sent and "left out" in sent
    assert len(sent) < len(big)


def test_default_max_tokens_is_never_tiny():
    assert describe("anthropic").max_tokens_for("claude-sonnet-5") >= 8192
    assert describe("openai_compatible").max_tokens_for("some-local-model") == 4096
