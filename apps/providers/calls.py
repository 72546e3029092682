"""One robust model call: retries before any text, continuation after max_tokens, tool rounds.

Provider-agnostic: it drives an adapter and yields the same events, plus a ToolResult for every
tool it ran. Text already shown is never retracted: a failure after text raises a
ProviderError that says so, and the caller keeps the partial reply.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import replace

from apps.providers import evidence
from apps.providers.types import (
    ChatMessage,
    ChatRequest,
    Milestone,
    ProviderAdapter,
    ProviderError,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
)

ToolRunner = Callable[[ToolCall], Awaitable[str]]
logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 4
MAX_CONTINUATIONS = 3
MAX_TOOL_ROUNDS = 5
MAX_RETRY_WAIT_SECONDS = 30.0
CONTINUE_PROMPT = (
    "Your previous reply was cut off by the length limit. Continue exactly where it stopped, "
    "without repeating anything and without any preamble."
)
TOOL_LIMIT_NOTE = "*(Stopped using tools after {rounds} rounds; answering from what I found.)*\n\n"
TOOL_LIMIT_PROMPT = (
    "You have used all {rounds} rounds of tool calls this reply may make. Do not call tools "
    "now: answer the person from what you have gathered, and say what you could not check."
)
RESUME_PROMPT = (
    "Your previous reply was cut off before it was finished. Continue exactly where it "
    "stopped, without repeating anything and without any preamble."
)

# Generous defaults: a tiny max_tokens is the commonest cause of truncated replies.
DEFAULT_MAX_TOKENS = (
    ("claude-opus", 16000),
    ("claude-sonnet", 16000),
    ("claude-haiku", 8192),
    ("claude", 8192),
    ("gpt-4.1", 16000),
    ("gpt-4o", 8192),
    ("gemini-2.5", 16000),
    ("gemini", 8192),
)


def default_max_tokens(model: str) -> int:
    for prefix, tokens in DEFAULT_MAX_TOKENS:
        if model.startswith(prefix):
            return tokens
    return 4096


async def _run_one(run_tool: ToolRunner, call: ToolCall) -> tuple[str, bool]:
    try:
        return await run_tool(call), False
    except Exception as exc:  # the model reads the error and can correct itself
        return f"Error: {exc}", True


def backoff_seconds(error: ProviderError, attempt: int) -> float:
    """Honour retry-after; otherwise exponential backoff with jitter."""
    if error.retry_after is not None:
        return min(error.retry_after, MAX_RETRY_WAIT_SECONDS)
    return min(0.5 * 2**attempt, 8.0) * (1 + random.random() * 0.25)


async def converse(
    adapter: ProviderAdapter,
    request: ChatRequest,
    *,
    api_key: str = "",
    base_url: str = "",
    run_tool: ToolRunner | None = None,
    max_attempts: int = MAX_ATTEMPTS,
    max_continuations: int = MAX_CONTINUATIONS,
    max_tool_rounds: int = MAX_TOOL_ROUNDS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    resume_text: str = "",
    result_item_chars: int = evidence.ITEM_CHARS,
    result_round_chars: int = evidence.ROUND_CHARS,
) -> AsyncGenerator[StreamEvent, None]:
    """Yield text, tool calls and results, then one summed Usage and the final Stop.

    With `resume_text` (a reply cut off when its worker died), the model is asked to continue
    that text: it goes in as the assistant's turn, followed by the continue instruction.
    """
    messages = list(request.messages)
    if resume_text:
        messages += [
            ChatMessage("assistant", ({"type": "text", "text": resume_text},)),
            ChatMessage("user", ({"type": "text", "text": RESUME_PROMPT},)),
        ]
        request = replace(request, metadata={**request.metadata, "resuming": True})
    usage = Usage()
    shown_any = False
    continuations = tool_rounds = 0
    calls: list[ToolCall]
    while True:
        text, calls, stop = "", [], Stop("other")
        for attempt in range(max_attempts):
            text, calls, stop = "", [], Stop("other")
            try:
                async for event in adapter.stream(
                    replace(request, messages=tuple(messages)), api_key=api_key, base_url=base_url
                ):
                    if isinstance(event, TextDelta):
                        text += event.text
                        shown_any = True
                        yield event
                    elif isinstance(event, ToolCall):
                        calls.append(event)
                    elif isinstance(event, Usage):
                        usage = usage + event
                    elif isinstance(event, Stop):
                        stop = event
                break
            except ProviderError as error:
                if text or shown_any:
                    raise ProviderError(
                        f"{error} — the reply stopped part-way; the text so far is kept.",
                        retryable=False,
                        error_type=error.error_type,
                        status=error.status,
                    ) from error
                if not error.retryable or attempt == max_attempts - 1:
                    raise
                wait = backoff_seconds(error, attempt)
                reason = error.error_type or (f"HTTP {error.status}" if error.status else "error")
                yield Milestone("retry", f"{reason}; again in {wait:.1f} s")
                await sleep(wait)

        if stop.reason == "max_tokens":
            logger.warning(
                "A %s reply reached the length limit (%s tokens); continuation %d of %d",
                request.model, request.max_tokens, continuations + 1, max_continuations,
            )  # fmt: skip
            if continuations < max_continuations:
                continuations += 1
                yield Milestone("continuation", f"length limit; continuation {continuations}")
                if text:  # the model goes on from its own words (a cut tool call is redone)
                    messages += [
                        ChatMessage("assistant", ({"type": "text", "text": text},)),
                        ChatMessage("user", ({"type": "text", "text": CONTINUE_PROMPT},)),
                    ]
                else:  # cut off inside a tool call: the same round again, with room to finish
                    request = replace(request, max_tokens=request.max_tokens * 2)
                continue

        if calls and run_tool is not None and tool_rounds >= max_tool_rounds:
            # Out of tool rounds: one last call without tools, answering from what it has.
            logger.info("A %s reply reached the tool-round limit (%d)", request.model, tool_rounds)
            yield Milestone("tool_limit", f"{tool_rounds} tool rounds: answering without tools")
            yield TextDelta(("\n\n" if text else "") + TOOL_LIMIT_NOTE.format(rounds=tool_rounds))
            if text:
                messages.append(ChatMessage("assistant", ({"type": "text", "text": text},)))
            prompt = TOOL_LIMIT_PROMPT.format(rounds=tool_rounds)
            messages.append(ChatMessage("user", ({"type": "text", "text": prompt},)))
            # The tools stay defined (Anthropic refuses tool blocks in a history without
            # them); a call made anyway is reported, never run.
            run_tool = None
            continue

        if calls and run_tool is not None:
            tool_rounds += 1
            for call in calls:
                yield call
            # A round's calls run together (each in its own database thread, as before).
            outcomes = await asyncio.gather(*(_run_one(run_tool, call) for call in calls))
            query = str(request.metadata.get("last_user_text", ""))
            trimmed = evidence.trim_round(
                [content for content, _ in outcomes], query=query,
                round_chars=result_round_chars, item_chars=result_item_chars,
            )  # fmt: skip
            results = [
                ToolResult(call.id, call.name, content, is_error, cut)
                for call, (content, is_error), cut in zip(calls, outcomes, trimmed, strict=True)
            ]
            for result in results:
                yield result
            assistant_parts = ([{"type": "text", "text": text}] if text else []) + [
                {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
                for c in calls
            ]
            result_parts = [
                {"type": "tool_result", "tool_call_id": r.tool_call_id, "name": r.name,
                 "content": r.trimmed or r.content, "is_error": r.is_error}
                for r in results
            ]  # fmt: skip
            messages += [
                ChatMessage("assistant", tuple(assistant_parts)),
                ChatMessage("user", tuple(result_parts)),
            ]
            continue

        for call in calls:  # no runner: report the calls, run nothing
            yield call
        if continuations and stop.reason != "max_tokens":
            logger.info("A %s reply recovered after %d continuations", request.model, continuations)
        yield usage
        yield replace(stop, continuations=continuations)
        return
