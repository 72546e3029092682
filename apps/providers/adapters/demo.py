"""The demo provider: an in-process, network-free stand-in that streams like a real model.

It answers whenever no credential is configured, with realistic pacing (about 300 ms to the
first token, then ~40 tokens a second) and Markdown output, and it says plainly that it is a
demo so nobody mistakes it for a model's opinion.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import replace

from django.conf import settings

from apps.providers.description import DescribedAdapter, ListedModel, ProviderDescription
from apps.providers.types import NO_AUTH, Auth, ChatRequest, Stop, StreamEvent, TextDelta, Usage

TOKEN_PATTERN = re.compile(r"\s*\S{1,4}|\s+")


def demo_reply_text(request: ChatRequest) -> str:
    """The Markdown the demo streams: deterministic for a given request."""
    speaker = request.metadata.get("speaker_name", "Assistant")
    last_user = request.metadata.get("last_user_text", "").strip()
    quoted = " ".join(last_user.split())
    quoted = quoted[:160] + ("…" if len(quoted) > 160 else "")
    turns = max(0, len(request.messages) - 1)  # the last block is the speaking instruction
    return (
        f"**Demo reply** from {speaker} — no model was called. "
        "Add a provider credential to talk to a real model.\n\n"
        f"> {quoted or '(an empty message)'}\n\n"
        f"This thread has {turns} message{'s' if turns != 1 else ''} so far. "
        "Here is what Parley does with a reply like this one:\n\n"
        "1. A Celery worker streams it from the provider.\n"
        "2. Deltas travel through Redis to every open tab, *batched* every few milliseconds.\n"
        "3. When the stream ends, the bubble is replaced by sanitised Markdown.\n\n"
        "```python\n"
        "def stream(reply):\n"
        "    for delta in reply:\n"
        "        publish(delta)  # no database write per token\n"
        "```\n\n"
        "Close the tab and come back: the reply keeps going without you."
    )


def tokenize(text: str) -> list[str]:
    """Split text into word-piece sized tokens that join back to exactly `text`."""
    return TOKEN_PATTERN.findall(text)


DESCRIPTION = ProviderDescription(
    kind="demo",
    label="Demo (no network)",
    wire="demo",
    base_url="none",
    needs_key=False,
    takes_key=False,
    default_model="demo-1",
    fallback_models=("demo-1",),
    cheap_model="demo-1",
    model_names="demo-1",
)


class DemoAdapter(DescribedAdapter):
    async def list_models(
        self, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> list[ListedModel]:
        return [ListedModel(name) for name in self.fallback_models]

    async def stream(
        self, request: ChatRequest, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> AsyncIterator[StreamEvent]:
        if request.metadata.get("resuming"):
            # Like a model continuing its cut-off answer: the text after what it already said
            # (the request ends with that answer and the instruction to continue).
            said = "".join(part.get("text", "") for part in request.messages[-2].parts)
            text = demo_reply_text(replace(request, messages=request.messages[:-2]))
            text = text[len(said) :] if text.startswith(said) else text
        else:
            text = demo_reply_text(request)
        tokens = tokenize(text)
        await asyncio.sleep(settings.PARLEY_DEMO_FIRST_TOKEN_MS / 1000)
        interval = 1 / settings.PARLEY_DEMO_TOKENS_PER_SECOND
        loop = asyncio.get_running_loop()
        started = loop.time()
        for index, token in enumerate(tokens):
            # Pace against the clock, not per sleep, so slow wake-ups do not drift the rate.
            delay = started + index * interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield TextDelta(token)
        prompt_chars = sum(
            len(part.get("text", "")) for message in request.messages for part in message.parts
        ) + sum(len(block.text) for block in request.system)
        yield Usage(input_tokens=max(1, prompt_chars // 4), output_tokens=len(tokens))
        yield Stop("end")
