"""Tools first, then one answer (design 002's tool-only mode, evidence builder and synthesis).

While a role gathers evidence it is told to only call tools. Prose it writes meanwhile is
held back, counted and sampled for the reply's log, and never shown: the bubble shows the
tool activity. When it calls no more tools (or the round limit is reached), one synthesis
request replaces the raw tool traffic with an evidence pack (each trimmed result labelled with
the call it came from) and the role writes its answer from that, under its output rules.

A first round that needs no tools is an answer: it streams once it is clearly more than a
preamble. A role that writes a long answer and then calls tools anyway has been seen, so the
reply goes on in the interleaved way rather than take back what was shown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from apps.providers import evidence
from apps.providers.types import (
    ChatMessage,
    ChatRequest,
    Milestone,
    ProviderError,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
)

TOOL_PHASE_PROMPT = (
    "Work in two steps. First gather what you need with the tools: call every tool you need, "
    "several at once where you can (the batch tools, such as read_files, take many items in "
    "one call), and write no prose while you do. When you have enough, reply with only the "
    "word DONE; you will then be given the evidence to write your answer from. If you need no "
    "tools at all, answer right away."
)
SYNTHESIS_PROMPT = (
    "Evidence you gathered with tools (each item names the call it came from; long results "
    "were trimmed to the parts most relevant to the request):\n\n{pack}\n\n"
    "Now write your answer from this evidence, following the instructions above. Do not call "
    "tools. Cite an item as [E1], [E2] where it supports a point, and say what the evidence "
    "does not settle."
)
HOLD_CHARS = 240  # text a first round may write before it is taken for an answer
PACK_CHARS = 12_000
DONE_WORDS = {"done", "done."}


@dataclass
class Round:
    """What one model call of the tool phase produced."""

    text: str = ""
    shown: bool = False  # its text went out (an answer, not held prose)
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop: Stop = field(default_factory=lambda: Stop("other"))


def with_instruction(message: ChatMessage, text: str) -> ChatMessage:
    """The role's cue message with `text` added after it (the cached prefix is untouched)."""
    return replace(message, parts=(*message.parts, {"type": "text", "text": text}))


def call_label(call: ToolCall) -> str:
    arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
    if len(arguments) > 160:
        arguments = arguments[:159] + "…"
    return f"{call.name}({arguments})"


def evidence_pack(gathered: list[tuple[ToolCall, ToolResult]], *, query: str) -> str:
    """Every result, labelled with its call, trimmed together to the pack's budget."""
    if not gathered:
        return "(No tool returned anything.)"
    trimmed = evidence.trim_round(
        [result.content for _, result in gathered], query=query, round_chars=PACK_CHARS
    )
    items = []
    for number, ((call, result), cut) in enumerate(zip(gathered, trimmed, strict=True), 1):
        status = " (an error)" if result.is_error else ""
        items.append(f"[E{number}] {call_label(call)}{status}:\n{cut or result.content}")
    return "\n\n".join(items)


def prose_note(prose: list[str]) -> str:
    sample = " ".join(prose[0].split())
    sample = sample[:120] + ("…" if len(sample) > 120 else "")
    rounds = "round" if len(prose) == 1 else "rounds"
    return f"{len(prose)} tool {rounds} also wrote prose, kept out of the reply; e.g. “{sample}”"


async def one_round(
    stream: Callable[[ChatRequest], AsyncGenerator[StreamEvent, None]],
    request: ChatRequest,
    outcome: Round,
    *,
    hold_chars: int | None,
    max_attempts: int,
    backoff: Callable[[ProviderError, int], float],
    sleep,
) -> AsyncGenerator[StreamEvent, None]:
    """One call of the tool phase, retried before anything was shown. Its text is held back
    (None: always; else until it passes `hold_chars`, then it streams as an answer)."""
    for attempt in range(max_attempts):
        outcome.text, outcome.calls, outcome.stop = "", [], Stop("other")
        try:
            async for event in stream(request):
                if isinstance(event, TextDelta):
                    outcome.text += event.text
                    if outcome.shown:
                        yield event
                    elif hold_chars is not None and len(outcome.text) > hold_chars:
                        outcome.shown = True
                        yield TextDelta(outcome.text)
                elif isinstance(event, ToolCall):
                    outcome.calls.append(event)
                elif isinstance(event, Usage):
                    outcome.usage = outcome.usage + event
                elif isinstance(event, Stop):
                    outcome.stop = event
            return
        except ProviderError as error:
            if outcome.shown:
                raise ProviderError(
                    f"{error} — the reply stopped part-way; the text so far is kept.",
                    retryable=False, error_type=error.error_type, status=error.status,
                ) from error  # fmt: skip
            if not error.retryable or attempt == max_attempts - 1:
                raise
            wait = backoff(error, attempt)
            reason = error.error_type or (f"HTTP {error.status}" if error.status else "error")
            yield Milestone("retry", f"{reason}; again in {wait:.1f} s")
            await sleep(wait)


def tool_round_messages(
    calls: list[ToolCall], results: list[ToolResult], *, text: str = ""
) -> list[ChatMessage]:
    """The assistant's calls and the user's results, for the next request."""
    assistant: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    assistant += [
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in calls
    ]
    sent = [
        {"type": "tool_result", "tool_call_id": r.tool_call_id, "name": r.name,
         "content": r.trimmed or r.content, "is_error": r.is_error}
        for r in results
    ]  # fmt: skip
    return [ChatMessage("assistant", tuple(assistant)), ChatMessage("user", tuple(sent))]


async def run_round(
    run_tool, calls: list[ToolCall], *, query: str, round_chars: int, item_chars: int
) -> list[ToolResult]:
    """Run a round's calls together; big results are trimmed for the model (kept whole)."""

    async def one(call: ToolCall) -> tuple[str, bool]:
        try:
            return await run_tool(call), False
        except Exception as exc:  # the model reads the error and can correct itself
            return f"Error: {exc}", True

    outcomes = await asyncio.gather(*(one(call) for call in calls))
    trimmed = evidence.trim_round(
        [content for content, _ in outcomes], query=query, round_chars=round_chars,
        item_chars=item_chars,
    )  # fmt: skip
    return [
        ToolResult(call.id, call.name, content, is_error, cut)
        for call, (content, is_error), cut in zip(calls, outcomes, trimmed, strict=True)
    ]
