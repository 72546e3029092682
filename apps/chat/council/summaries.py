"""Summaries of long transcripts: they shorten requests, never storage.

When a reply's estimated history exceeds PARLEY_SUMMARY_THRESHOLD_TOKENS, the older part is
replaced in its request by a summary written by a cheap model of the same provider. A
summary is stored per thread and keyed by the last message it covers, so it is computed once
and reused by every role and turn until what follows it outgrows the threshold; the next one
extends it. Concurrent replies of a fan-out wait for one writer (a Redis lock).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import IntegrityError

from apps.chat import livestate
from apps.chat.council.once import written_once
from apps.chat.council.prompting import TranscriptEntry, entry_block, estimate_tokens
from apps.chat.models import ThreadSummary
from apps.chat.records.text import storable
from apps.providers.calls import converse
from apps.providers.registry import describe
from apps.providers.types import (
    NO_AUTH,
    Auth,
    ChatMessage,
    ChatRequest,
    ProviderError,
    SystemBlock,
    TextDelta,
    Usage,
)

logger = logging.getLogger(__name__)

SUMMARY_RULES = (
    "You write the running summary of a group chat between a person and several AI roles. "
    "Keep every decision, open question, fact, name and number, and who said what. Write "
    "compact Markdown bullet points grouped by topic. Never invent anything."
)
LOCK_SECONDS = 180
WAIT_SECONDS = 120


@dataclass(frozen=True)
class Summary:
    covers_id: int
    text: str


@dataclass(frozen=True)
class SummaryPlan:
    thread_id: int
    covers_id: int
    existing: Summary | None = None  # reuse as it is
    previous: Summary | None = None  # extend this one with `entries`
    entries: tuple[TranscriptEntry, ...] = ()


def _tokens(entries: list[TranscriptEntry]) -> int:
    return sum(estimate_tokens(entry_block(entry)) for entry in entries)


def plan_summary(*, thread_id: int, entries: list[TranscriptEntry]) -> SummaryPlan | None:
    """Whether a request with this history needs a summary, and which one."""
    threshold = settings.PARLEY_SUMMARY_THRESHOLD_TOKENS
    if _tokens(entries) <= threshold:
        return None
    ids = [entry.message_id for entry in entries]
    stored = {
        row.covers_id: row
        for row in ThreadSummary.objects.filter(thread_id=thread_id, covers_id__in=ids)
    }
    previous_index, previous = -1, None
    for index in reversed(range(len(entries))):
        row = stored.get(entries[index].message_id)
        if row is None:
            continue
        summary = Summary(row.covers_id, row.text)
        if estimate_tokens(row.text) + _tokens(entries[index + 1 :]) <= threshold:
            return SummaryPlan(thread_id, row.covers_id, existing=summary)
        previous_index, previous = index, summary
        break
    # Keep the most recent half of the budget verbatim; fold everything older in.
    budget, boundary = threshold // 2, len(entries) - 1
    while boundary > previous_index and _tokens(entries[boundary:]) <= budget:
        boundary -= 1
    if boundary <= previous_index:
        return SummaryPlan(thread_id, previous.covers_id, existing=previous) if previous else None
    return SummaryPlan(
        thread_id,
        entries[boundary].message_id,
        previous=previous,
        # A summary is shared by every role of the thread: a whisper is never in it (the
        # roles it named keep it only while it is recent enough to be sent verbatim).
        entries=tuple(e for e in entries[previous_index + 1 : boundary + 1] if not e.private),
    )


async def written_text(
    adapter, request: ChatRequest, *, api_key: str, base_url: str, auth: Auth = NO_AUTH
) -> tuple[str, Usage]:
    """The whole text and usage of one call that writes for Parley (a summary, a digest)."""
    text, usage = "", Usage()
    async for event in converse(adapter, request, api_key=api_key, base_url=base_url, auth=auth):
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, Usage):
            usage = event
    return text, usage


def summary_request(plan: SummaryPlan, *, model: str) -> ChatRequest:
    parts = []
    if plan.previous is not None:
        parts.append(f"The summary so far:\n{plan.previous.text}")
    parts.append("The conversation to fold in:\n" + "\n\n".join(map(entry_block, plan.entries)))
    parts.append("Summarise the conversation now, as one updated summary.")
    return ChatRequest(
        model=model,
        system=(SystemBlock(SUMMARY_RULES),),
        messages=(ChatMessage("user", ({"type": "text", "text": "\n\n".join(parts)},)),),
        max_tokens=2048,
    )


def _stored(plan: SummaryPlan) -> Summary | None:
    row = ThreadSummary.objects.filter(thread_id=plan.thread_id, covers_id=plan.covers_id).first()
    return Summary(row.covers_id, row.text) if row else None


def _store(plan: SummaryPlan, *, text: str, provider: str, model: str, usage: dict) -> Summary:
    try:
        row, _ = ThreadSummary.objects.get_or_create(
            thread_id=plan.thread_id,
            covers_id=plan.covers_id,
            defaults={"text": storable(text), "provider": provider, "model": model, "usage": usage},
        )
    except IntegrityError:  # another writer won the race
        row = ThreadSummary.objects.get(thread_id=plan.thread_id, covers_id=plan.covers_id)
    return Summary(row.covers_id, row.text)


async def ensure_summary(
    plan: SummaryPlan,
    *,
    adapter,
    model: str,
    api_key: str,
    base_url: str,
    redis,
    auth: Auth = NO_AUTH,
) -> Summary | None:
    """The plan's summary: stored, or computed once (others wait for the writer).

    None when the summary call fails; the reply then goes out with the full transcript.
    """
    if plan.existing is not None:
        return plan.existing

    async def write() -> Summary | None:
        # The provider's fast, inexpensive model; a server of one's own reuses the reply's.
        summary_model = describe(adapter.kind).cheap_model or model
        try:
            text, usage = await written_text(
                adapter, summary_request(plan, model=summary_model),
                api_key=api_key, base_url=base_url, auth=auth,
            )  # fmt: skip
        except ProviderError as exc:
            logger.warning("Summarising thread %s failed: %s", plan.thread_id, exc)
            return None
        if not text.strip():
            return None
        return await database_sync_to_async(_store)(
            plan,
            text=text.strip(),
            provider=adapter.kind,
            model=summary_model,
            usage=usage.as_dict(),
        )

    return await written_once(
        redis,
        f"{livestate.PREFIX}:summary-lock:{plan.thread_id}:{plan.covers_id}",
        stored=database_sync_to_async(lambda: _stored(plan)),
        write=write,
        wait_seconds=WAIT_SECONDS,
        lock_seconds=LOCK_SECONDS,
    )
