"""Each adapter through its official SDK against the loopback emulator."""

from __future__ import annotations

import json

import pytest

from apps.providers.emulator import Script
from apps.providers.registry import get_adapter
from apps.providers.types import (
    NO_AUTH,
    ChatMessage,
    ChatRequest,
    ProviderError,
    Stop,
    SystemBlock,
    TextDelta,
    ToolCall,
    ToolDefinition,
    Usage,
)

PROVIDERS = ["anthropic", "openai", "openai_compatible", "gemini"]
WIRE = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai_compatible": "openai",
    "gemini": "gemini",
}
WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def base_url(emulator, kind: str) -> str:
    return emulator.url + ("/v1" if kind.startswith("openai") else "")


def request(text="Hello", **extra) -> ChatRequest:
    return ChatRequest(
        model="model-x",
        system=(SystemBlock("You are terse.", cache=True),),
        messages=(ChatMessage("user", ({"type": "text", "text": text},)),),
        max_tokens=512,
        **extra,
    )


async def collect(kind: str, emulator, req: ChatRequest, key: str = "test-key") -> list:
    adapter = get_adapter(kind)
    return [
        event async for event in adapter.stream(req, api_key=key, base_url=base_url(emulator, kind))
    ]


def text_of(events) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_text_streams_in_many_deltas(kind, emulator):
    emulator.script(Script(text="The quick brown fox jumps over the lazy dog."))
    events = await collect(kind, emulator, request())
    assert text_of(events) == "The quick brown fox jumps over the lazy dog."
    assert sum(isinstance(e, TextDelta) for e in events) > 5
    assert events[-1] == Stop("end")
    assert emulator.requests[-1].provider == WIRE[kind]


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_several_text_blocks_are_all_kept(kind, emulator):
    emulator.script(Script(text=["First block. ", "Second block."]))
    assert text_of(await collect(kind, emulator, request())) == "First block. Second block."


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_tool_calls_arrive_whole_with_their_arguments(kind, emulator):
    emulator.script(
        Script(
            text="Let me check.",
            tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris, France"}}],
        )
    )
    events = await collect(kind, emulator, request(tools=(WEATHER,)))
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Paris, France"})]
    assert calls[0].id
    assert events[-1] == Stop("tool_use")


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_max_tokens_stop_is_reported(kind, emulator):
    emulator.script(Script(text="cut off mid", stop="max_tokens"))
    assert (await collect(kind, emulator, request()))[-1] == Stop("max_tokens")


@pytest.mark.parametrize(("kind", "status", "retryable"), [
    ("anthropic", 529, True), ("anthropic", 400, False), ("openai", 429, True),
    ("openai", 500, True), ("gemini", 503, True), ("gemini", 400, False),
])  # fmt: skip
async def test_http_errors_say_whether_retrying_helps(kind, status, retryable, emulator):
    emulator.script(Script(status=status, error_type="overloaded_error", retry_after=2))
    with pytest.raises(ProviderError) as caught:
        await collect(kind, emulator, request())
    assert caught.value.retryable is retryable
    assert caught.value.status == status
    if kind != "gemini":
        assert caught.value.retry_after == 2
    assert len(emulator.requests) == 1  # the SDK itself did not retry


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_an_error_mid_stream_keeps_the_partial_text(kind, emulator):
    emulator.script(Script(text="Partial answer that breaks", error_after_chars=8))
    events = []
    with pytest.raises(ProviderError) as caught:
        async for event in get_adapter(kind).stream(
            request(), api_key="k", base_url=base_url(emulator, kind)
        ):
            events.append(event)
    assert text_of(events).startswith("Partial")
    if kind == "anthropic":
        assert caught.value.error_type == "overloaded_error"
        assert caught.value.retryable


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_usage_is_reported(kind, emulator):
    emulator.script(Script(text="Counted.", usage={"cached_tokens": 7}))
    usage = next(e for e in await collect(kind, emulator, request()) if isinstance(e, Usage))
    assert usage.output_tokens > 0
    assert usage.input_tokens > 0
    if kind != "anthropic":
        assert usage.cache_read_tokens == 7


async def test_anthropic_cache_is_written_then_read_by_the_same_prefix(emulator):
    long_system = "Group chat rules. " * 200  # above the emulator's minimum
    req = ChatRequest(
        model="claude-x",
        system=(SystemBlock(long_system, cache=True),),
        messages=(ChatMessage("user", ({"type": "text", "text": "Hi"},)),),
    )
    first = next(e for e in await collect("anthropic", emulator, req) if isinstance(e, Usage))
    second = next(e for e in await collect("anthropic", emulator, req) if isinstance(e, Usage))
    assert first.cache_write_tokens > 0 and first.cache_read_tokens == 0
    assert second.cache_read_tokens == first.cache_write_tokens
    assert second.cache_write_tokens == 0
    assert emulator.requests[0].body["system"][0]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_models_are_listed(kind, emulator):
    listed = await get_adapter(kind).list_models(api_key="k", base_url=base_url(emulator, kind))
    assert sorted(model.name for model in listed) == sorted(emulator.models[WIRE[kind]])
    # Anthropic's list says what each model reads; OpenAI's and Gemini's do not.
    assert all((model.reads is not None) == (kind == "anthropic") for model in listed)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_bad_key_is_a_clear_permanent_error(kind, emulator):
    with pytest.raises(ProviderError) as caught:
        await get_adapter(kind).list_models(api_key="bad-key", base_url=base_url(emulator, kind))
    assert caught.value.status == 401
    assert not caught.value.retryable
    assert "bad-key" not in str(caught.value)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_an_unreachable_server_is_reported_as_such(kind):
    from config.embedded_redis import free_port

    url = f"http://127.0.0.1:{free_port()}" + ("/v1" if kind.startswith("openai") else "")
    with pytest.raises(ProviderError, match=r"(?i)reach"):
        await get_adapter(kind).list_models(api_key="k", base_url=url)


async def sdk_parse(emulator, req: ChatRequest) -> tuple[str, list[tuple[str, str]], Usage, str]:
    """The same request through the openai SDK's own (model-object) stream: the reference."""
    import openai

    from apps.providers.adapters.translate import to_openai

    text, calls, usage, finish = "", {}, Usage(), ""
    async with openai.AsyncOpenAI(
        api_key="test-key", base_url=base_url(emulator, "openai"), max_retries=0
    ) as client:
        stream = await client.chat.completions.create(
            **to_openai(req), max_tokens=req.max_tokens, stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
        async for chunk in stream:
            if chunk.usage:
                details = chunk.usage.prompt_tokens_details
                cached = (details.cached_tokens or 0) if details else 0
                usage = Usage(chunk.usage.prompt_tokens - cached, chunk.usage.completion_tokens,
                              cache_read_tokens=cached)  # fmt: skip
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or []:
                    entry = calls.setdefault(call.index, ["", ""])
                    entry[0] = entry[0] or (call.function.name or "")
                    entry[1] += call.function.arguments or ""
                finish = choice.finish_reason or finish
    return text, [tuple(entry) for _, entry in sorted(calls.items())], usage, finish


@pytest.mark.parametrize(
    "script",
    [
        Script(text="Plain words, with **Markdown** and ünïcode — 🎬."),
        Script(text=["Two ", "blocks."], usage={"cached_tokens": 9}),
        Script(text="Cut short", stop="max_tokens"),
        Script(text="", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}},
                                    {"name": "get_weather", "arguments": {"city": "Rome"}}]),
        Script(text="x" * 5000, chunk_chars=700),
        # One event's line far over aiohttp's own 128 KiB `readline` limit.
        Script(text="y" * 300_000, chunk_chars=300_000),
        # Events one by one, each its own read, as a paced model sends them.
        Script(text="word " * 40, chunk_chars=5, tokens_per_second=400),
        # A gzip-encoded stream (a proxy's doing) is read through the SDK, which decodes it.
        Script(text="Compressed, and still word for word.", compress=True),
    ],
    ids=["text", "blocks-and-cache", "max-tokens", "two-tool-calls", "big-chunks",
         "a-300-kb-line", "paced", "gzip"],
)  # fmt: skip
async def test_the_openai_raw_event_path_matches_the_sdks_own_parse(script, emulator):
    """The adapter reads the SSE events itself (cheaper than a model object per chunk); what it
    yields must be what the SDK's parse gives: text, tool calls, usage and stop reason."""
    emulator.script(script, script)
    req = request(tools=(WEATHER,))
    events = await collect("openai", emulator, req)
    text, calls, usage, finish = await sdk_parse(emulator, req)
    assert text_of(events) == text
    ours = [(e.name, json.dumps(e.arguments)) for e in events if isinstance(e, ToolCall)]
    assert ours == [(name, json.dumps(json.loads(args))) for name, args in calls]
    assert next(e for e in events if isinstance(e, Usage)) == usage
    stop = events[-1]
    assert isinstance(stop, Stop)
    assert stop.reason == {"stop": "end", "length": "max_tokens", "tool_calls": "tool_use"}[finish]


async def test_the_openai_request_body_is_what_the_sdks_own_create_sends(emulator):
    """The transcript and tools skip the SDK's per-message transform (`extra_body`): the body
    on the wire must be exactly what the SDK's ordinary `create` sends."""
    emulator.script(Script(text="ok"), Script(text="ok"))
    history = (
        ChatMessage("user", ({"type": "text", "text": "Weather in Oslo? <b>é</b> 🎬"},)),
        ChatMessage("assistant", (
            {"type": "text", "text": "Checking."},
            {"type": "tool_call", "id": "call_1", "name": "get_weather",
             "arguments": {"city": "Oslo"}},
        )),
        ChatMessage("user", (
            {"type": "tool_result", "tool_call_id": "call_1", "name": "get_weather",
             "content": "Rain, 4 °C"},
        )),
        ChatMessage("user", ({"type": "text", "text": "And tomorrow?"},)),
    )  # fmt: skip
    req = ChatRequest(
        model="model-x", system=(SystemBlock("You are terse."),), messages=history,
        max_tokens=256, tools=(WEATHER,),
    )  # fmt: skip
    await collect("openai", emulator, req)
    await sdk_parse(emulator, req)
    ours, reference = (record.body for record in emulator.requests[-2:])
    assert ours == reference
    assert [m["role"] for m in ours["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert ours["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
async def test_the_openai_stream_is_read_from_aiohttp_unless_it_is_compressed(compressed, emulator):
    """The SDK's line reader costs most of a streamed chunk in the worker: a plain stream is
    read from aiohttp directly (in a worker's kept client and a one-off one alike), a gzip one
    through the SDK, which decodes it. Both give the same lines."""
    import asyncio

    from apps.providers.adapters import clients

    emulator.script(Script(text="One two three.", compress=compressed))
    emulator.script(Script(text="One two three.", compress=compressed))
    adapter = get_adapter("openai")
    for kept in (False, True):
        if kept:
            clients.keep_clients_for(asyncio.get_running_loop())
        async with clients.client_scope(
            ("test", kept), lambda: adapter._client("k", emulator.url + "/v1", NO_AUTH),
            lambda client: client.close(),
        ) as client, client.chat.completions.with_streaming_response.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        ) as response:  # fmt: skip
            lines = clients.response_lines(response)
            read = [line async for line in lines]
        fast = lines.__qualname__ == "_TellingApart.lines"  # type: ignore[attr-defined]
        assert fast is not compressed, (kept, lines.__qualname__)
        text = "".join(
            json.loads(line[5:])["choices"][0]["delta"].get("content") or ""
            for line in read
            if line.startswith(b"data:") and line[5:].strip() != b"[DONE]"
            and json.loads(line[5:])["choices"]
        )  # fmt: skip
        assert text == "One two three."
    await clients.close_kept_clients()


async def test_a_stream_that_falls_silent_times_out_as_a_retryable_timeout(emulator, monkeypatch):
    """The raw event path keeps its own read timeout (aiohttp's timer per chunk is switched
    off for it): a stream that stops sending mid-answer ends as the SDK's timeout would,
    with the text that came before it."""
    import time

    from apps.providers.adapters.openai import OpenAIAdapter

    monkeypatch.setattr(OpenAIAdapter, "stream_timeout_seconds", 0.6)
    emulator.script(Script(text="Half an answer, then nothing", stall_after_chars=6,
                           stall_seconds=10))  # fmt: skip
    adapter, shown = get_adapter("openai"), []
    started = time.monotonic()
    with pytest.raises(ProviderError) as raised:
        async for event in adapter.stream(
            request(), api_key="k", base_url=base_url(emulator, "openai")
        ):
            if isinstance(event, TextDelta):
                shown.append(event.text)
    assert raised.value.error_type == "timeout" and raised.value.retryable
    assert "".join(shown).startswith("Half")
    assert time.monotonic() - started < 5  # the timeout, not the stall's end


async def test_a_slow_stream_that_keeps_sending_never_times_out(emulator, monkeypatch):
    """The read timeout is between two reads, not for the whole answer: one that takes
    several timeouts in all, a chunk at a time, finishes."""
    from apps.providers.adapters.openai import OpenAIAdapter

    monkeypatch.setattr(OpenAIAdapter, "stream_timeout_seconds", 0.6)
    emulator.script(
        Script(text="one two three four five six", chunk_chars=4, tokens_per_second=4)
    )  # about 1.75 s in all, a chunk per 0.25 s
    events = await collect("openai", emulator, request())
    assert text_of(events) == "one two three four five six"
    assert events[-1] == Stop("end")
