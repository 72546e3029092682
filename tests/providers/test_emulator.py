"""Properties of the emulator that tests and benchmarks rely on."""

from __future__ import annotations

import asyncio
import socket

import pytest
from google import genai
from google.genai import types

from apps.providers.emulator import Script
from apps.providers.registry import get_adapter
from apps.providers.types import TextDelta
from tests.infra import NetworkAccessDenied, denied_attempts
from tests.providers.test_adapters import base_url, request


async def test_a_connection_the_client_closes_early_is_recorded(emulator):
    emulator.script(Script(text="word " * 400, tokens_per_second=200))
    stream = get_adapter("anthropic").stream(request(), api_key="k", base_url=emulator.url)
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()
    for _ in range(50):
        if emulator.requests[-1].ended:
            break
        await asyncio.sleep(0.05)
    assert emulator.requests[-1].closed_early


async def test_concurrent_streams_are_served_side_by_side(emulator):
    emulator.script(*[Script(text="tick " * 20, tokens_per_second=50) for _ in range(4)])

    async def one():
        return [
            e
            async for e in get_adapter("openai").stream(
                request(), base_url=base_url(emulator, "openai")
            )
        ]

    await asyncio.gather(*(one() for _ in range(4)))
    for _ in range(100):  # the emulator notes a request's end just after its last byte
        if all(r.ended is not None for r in emulator.requests):
            break
        await asyncio.sleep(0.05)
    spans = [(r.started, r.ended) for r in emulator.requests]
    assert max(start for start, _ in spans) < min(end for _, end in spans)  # all four overlapped


@pytest.mark.parametrize("version", ["v1", "v1beta"])
async def test_gemini_streams_on_both_api_versions(emulator, version):
    emulator.script(Script(text="Bonjour."))
    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=emulator.url, api_version=version)
    )
    stream = await client.aio.models.generate_content_stream(model="gemini-x", contents="Hi")
    text = "".join([chunk.text or "" async for chunk in stream])
    assert text == "Bonjour."
    assert emulator.requests[-1].path.startswith(
        f"/{version}/models/gemini-x:streamGenerateContent"
    )


async def test_anthropic_cache_entries_are_usable_only_once_the_writer_has_begun(emulator):
    long_system = "Shared group rules. " * 200
    req = request()
    from dataclasses import replace

    from apps.providers.types import SystemBlock

    req = replace(req, system=(SystemBlock(long_system, cache=True),))
    emulator.script(*[Script(text="ok", ttft_ms=300) for _ in range(2)])
    adapter = get_adapter("anthropic")

    async def usage():
        events = [e async for e in adapter.stream(req, api_key="k", base_url=emulator.url)]
        return events[-2]

    first, second = await asyncio.gather(usage(), usage())  # fired at the same instant
    assert first.cache_write_tokens > 0 and second.cache_write_tokens > 0
    third = await usage()
    assert third.cache_read_tokens > 0 and third.cache_write_tokens == 0


def test_the_suite_cannot_reach_beyond_loopback():
    with pytest.raises(NetworkAccessDenied), socket.socket() as sock:
        sock.connect(("192.0.2.10", 443))  # TEST-NET-1: refused before any packet leaves
    assert denied_attempts == ["192.0.2.10"]
    denied_attempts.clear()  # this attempt was the point of the test
