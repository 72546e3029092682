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

from apps.providers import evidence, tools_first
from apps.providers.types import (
    NO_AUTH,
    Auth,
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
    auth: Auth = NO_AUTH,
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
    if request.metadata.get("tools_first") and run_tool is not None and not resume_text:
        async for event in gather_then_answer(
            adapter, request, api_key=api_key, base_url=base_url, auth=auth, run_tool=run_tool,
            max_attempts=max_attempts, max_tool_rounds=max_tool_rounds, sleep=sleep,
            result_item_chars=result_item_chars, result_round_chars=result_round_chars,
        ):  # fmt: skip
            yield event
        return
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
                    replace(request, messages=tuple(messages)),
                    api_key=api_key,
                    base_url=base_url,
                    auth=auth,
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
            results = await tools_first.run_round(
                run_tool, calls, query=str(request.metadata.get("last_user_text", "")),
                round_chars=result_round_chars, item_chars=result_item_chars,
            )  # fmt: skip
            for result in results:
                yield result
            messages += tools_first.tool_round_messages(calls, results, text=text)
            continue

        for call in calls:  # no runner: report the calls, run nothing
            yield call
        if continuations and stop.reason != "max_tokens":
            logger.info("A %s reply recovered after %d continuations", request.model, continuations)
        yield usage
        yield replace(stop, continuations=continuations)
        return


async def gather_then_answer(
    adapter: ProviderAdapter,
    request: ChatRequest,
    *,
    api_key: str,
    base_url: str,
    auth: Auth,
    run_tool: ToolRunner,
    max_attempts: int,
    max_tool_rounds: int,
    sleep: Callable[[float], Awaitable[None]],
    result_item_chars: int,
    result_round_chars: int,
) -> AsyncGenerator[StreamEvent, None]:
    """Tools first, then one answer from an evidence pack (see `tools_first`)."""

    def stream(req: ChatRequest):
        return adapter.stream(req, api_key=api_key, base_url=base_url, auth=auth)

    query = str(request.metadata.get("last_user_text", ""))
    base = list(request.messages)
    messages = [*base[:-1], tools_first.with_instruction(base[-1], tools_first.TOOL_PHASE_PROMPT)]
    usage, prose, rounds = Usage(), [], 0
    gathered: list[tuple[ToolCall, ToolResult]] = []
    while True:
        outcome = tools_first.Round()
        async for event in tools_first.one_round(
            stream, replace(request, messages=tuple(messages)), outcome,
            hold_chars=tools_first.HOLD_CHARS if rounds == 0 else None,
            max_attempts=max_attempts, backoff=backoff_seconds, sleep=sleep,
        ):  # fmt: skip
            yield event
        usage = usage + outcome.usage
        if outcome.stop.reason == "max_tokens" and not outcome.shown:
            request = replace(request, max_tokens=request.max_tokens * 2)  # room to finish
            yield Milestone("continuation", "length limit while gathering: again, with room")
            continue
        if not outcome.calls:
            if rounds == 0:  # it needed no tools: what it wrote is the answer
                if not outcome.shown:
                    yield TextDelta(outcome.text)
                yield usage
                yield outcome.stop
                return
            if outcome.text.strip().lower() not in tools_first.DONE_WORDS:
                prose.append(outcome.text)
            break
        for call in outcome.calls:
            yield call
        if rounds >= max_tool_rounds:
            yield Milestone("tool_limit", f"{rounds} tool rounds: answering from the evidence")
            break
        rounds += 1
        results = await tools_first.run_round(
            run_tool, outcome.calls, query=query, round_chars=result_round_chars,
            item_chars=result_item_chars,
        )  # fmt: skip
        for result in results:
            yield result
        if outcome.shown:  # it answered, then called tools anyway: go on the interleaved way
            yield Milestone("tools_first", "wrote an answer before calling tools: interleaved")
            messages += tools_first.tool_round_messages(outcome.calls, results, text=outcome.text)
            async for event in converse(
                adapter, replace(request, messages=tuple(messages), metadata={
                    **request.metadata, "tools_first": False}),
                api_key=api_key, base_url=base_url, auth=auth, run_tool=run_tool,
                max_attempts=max_attempts, max_tool_rounds=max_tool_rounds - rounds, sleep=sleep,
                result_item_chars=result_item_chars, result_round_chars=result_round_chars,
            ):  # fmt: skip
                yield usage + event if isinstance(event, Usage) else event
            return
        if outcome.text.strip():
            prose.append(outcome.text)
        gathered += zip(outcome.calls, results, strict=True)
        messages += tools_first.tool_round_messages(outcome.calls, results)
    if prose:
        yield Milestone("tool_prose", tools_first.prose_note(prose))
    pack = tools_first.evidence_pack(gathered, query=query)
    yield Milestone("synthesis", f"{len(gathered)} results in an evidence pack of {len(pack):,} "
                                 f"characters")  # fmt: skip
    synthesis = replace(
        request,
        messages=(
            *base[:-1],
            tools_first.with_instruction(base[-1], tools_first.SYNTHESIS_PROMPT.format(pack=pack)),
        ),
        metadata={**request.metadata, "tools_first": False, "synthesis": True},
    )
    # The tools stay defined (the cached prefix starts with them); a call is reported, not run.
    async for event in converse(
        adapter, synthesis, api_key=api_key, base_url=base_url, auth=auth, run_tool=None,
        max_attempts=max_attempts, sleep=sleep,
    ):  # fmt: skip
        yield usage + event if isinstance(event, Usage) else event
