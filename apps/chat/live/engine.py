"""Streams one role's reply inside a worker: provider → Redis live tail → channel layer → DB.

Runs as one asyncio program per reply (the async SDK clients and the channel layer share the
loop). Deltas are coalesced and published every PARLEY_FLUSH_INTERVAL_MS; the partial text is
checkpointed to the database every PARLEY_CHECKPOINT_INTERVAL_MS, never per token. A watcher
polls the cancellation flag and cancels the stream, which closes the provider connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from contextlib import aclosing
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from apps.chat import livestate
from apps.chat.council import orchestration, summaries, tools
from apps.chat.council.replies import reply_rerun
from apps.chat.council.requests import reply_setup, request_for_reply, transcript_entries
from apps.chat.council.turn_guard import TurnGuard
from apps.chat.display import events
from apps.chat.models import MessageStatus
from apps.chat.records.replies import (
    message_checkpoint,
    message_claim,
    message_finish,
    reply_is_queued,
    reply_secret,
)
from apps.providers.calls import converse
from apps.providers.registry import get_adapter
from apps.providers.types import ProviderError, TextDelta, ToolCall, ToolResult, Usage

logger = logging.getLogger(__name__)
CANCEL_POLL_SECONDS = 0.2
LEASE_WAIT_POLL_SECONDS = 0.1


class ReplyCancelled(Exception):
    """The person interrupted the reply."""


class LiveReply:
    """The published state of one streaming reply: buffered text, Redis tail, checkpoints."""

    def __init__(self, *, message, redis, layer, lease: str = ""):
        self.message_pk = message.pk
        self.lease = lease
        self.message_id = str(message.public_id)
        self.group = events.thread_group(message.thread.public_id)
        self.redis = redis
        self.layer = layer
        self.text = ""  # everything received
        self.parts: list[dict] = []  # tool calls and results, in order, between text runs
        self.text_in_parts = 0
        self.published = 0  # how much of `text` has gone out
        self.checkpointed = 0

    def add(self, chunk: str) -> None:
        self.text += chunk

    def add_part(self, event: ToolCall | ToolResult) -> None:
        if len(self.text) > self.text_in_parts:
            self.parts.append({"type": "text", "text": self.text[self.text_in_parts :]})
            self.text_in_parts = len(self.text)
        part: dict[str, Any]
        if isinstance(event, ToolCall):
            part = {"type": "tool_call", "id": event.id, "name": event.name,
                    "arguments": event.arguments}  # fmt: skip
        else:
            part = {"type": "tool_result", "tool_call_id": event.tool_call_id, "name": event.name,
                    "content": event.content, "is_error": event.is_error}  # fmt: skip
        self.parts.append(part)

    def content(self) -> list[dict]:
        """The canonical parts of the reply: text runs and tool activity in order."""
        parts = list(self.parts)
        tail = self.text[self.text_in_parts :].rstrip()
        if tail:
            parts.append({"type": "text", "text": tail})
        return parts

    async def flush(self) -> None:
        if self.published == len(self.text):
            return
        chunk = self.text[self.published :]
        self.published = len(self.text)
        seq = await livestate.live_append(self.redis, self.message_id, chunk)
        await events.publish_delta(
            self.layer, group=self.group, message_id=self.message_id, seq=seq, text=chunk
        )

    async def checkpoint(self) -> None:
        if self.checkpointed == len(self.text):
            return
        self.checkpointed = len(self.text)
        await database_sync_to_async(message_checkpoint)(message_id=self.message_pk, text=self.text)

    async def run_publisher(self, stop: asyncio.Event) -> None:
        """Flush on a short timer, checkpoint on a long one, renew the lease, until `stop`."""
        flush_every = settings.PARLEY_FLUSH_INTERVAL_MS / 1000
        checkpoint_every = settings.PARLEY_CHECKPOINT_INTERVAL_MS / 1000
        last_checkpoint = last_renewal = time.monotonic()
        while not await _wait(stop, flush_every):
            await self.flush()
            if time.monotonic() - last_checkpoint >= checkpoint_every:
                last_checkpoint = time.monotonic()
                await self.checkpoint()
            if time.monotonic() - last_renewal >= livestate.LEASE_RENEW_SECONDS:
                last_renewal = time.monotonic()
                await livestate.lease_renew(self.redis, self.message_pk, self.lease)


async def _wait(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to `seconds`; True as soon as `stop` is set."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def _watch_cancel(redis, message_id: str, target: asyncio.Task, stop: asyncio.Event) -> None:
    while not target.done() and not await _wait(stop, CANCEL_POLL_SECONDS):
        if await livestate.cancel_requested(redis, message_id):
            target.cancel(msg="interrupted")
            return


async def stream_reply(message_pk: int) -> None:
    """Claim, stream, publish and settle one queued reply. Safe to run twice for one message.

    Its database calls run on a thread of its own (ThreadSensitiveContext) instead of asgiref's
    single process-wide thread, so concurrent streams never queue behind each other there.
    """
    async with ThreadSensitiveContext():
        await _stream_reply(message_pk)


async def _stream_reply(message_pk: int) -> None:
    async with livestate.redis_for_task() as redis:
        # The lease comes first: a redelivered or recovered task for a reply that a live
        # worker is streaming must not restart it under that worker's feet.
        lease = uuid.uuid4().hex
        if not await _lease_when_free(redis, message_pk, lease):
            return
        try:
            claim = await database_sync_to_async(message_claim)(message_id=message_pk)
            if claim is not None:
                await _stream_claimed(claim.message, redis, lease)
        finally:
            await livestate.lease_release(redis, message_pk, lease)


async def _lease_when_free(redis, message_pk: int, lease: str) -> bool:
    """Take the reply's lease, waiting while a previous run of a re-queued reply finishes.

    A held lease on a `queued` reply means its earlier run (now settled, then retried or
    regenerated) has not yet let go; on a `streaming` reply it means a live duplicate, which
    this task must leave alone. A dead holder's lease lapses within its TTL.
    """
    deadline = time.monotonic() + livestate.LEASE_TTL_SECONDS + 5
    while not await livestate.lease_acquire(redis, message_pk, lease):
        queued = await database_sync_to_async(reply_is_queued)(message_id=message_pk)
        if not queued or time.monotonic() > deadline:
            return False
        await asyncio.sleep(LEASE_WAIT_POLL_SECONDS)
    return True


async def _stream_claimed(message, redis, lease: str) -> None:
    message_pk = message.pk
    layer = get_channel_layer()
    live = LiveReply(message=message, redis=redis, layer=layer, lease=lease)
    setup = await database_sync_to_async(reply_setup)(message=message)
    started = time.monotonic()
    first_token_at: float | None = None
    usage = Usage()

    start_seq = await livestate.live_reset(redis, live.message_id)
    await events.publish_state(
        layer,
        group=live.group,
        event=await database_sync_to_async(events.state_event)(
            message=message, seq=start_seq, live_text=""
        ),
    )

    async def run_tool(call: ToolCall) -> str:
        return await database_sync_to_async(tools.run_tool)(setup.tool_context, call)

    async def show_tool_activity() -> None:
        """Tool calls and results appear in the bubble while the reply goes on."""
        await live.flush()
        seq = await livestate.live_append(redis, live.message_id, "")
        message.content = live.content()
        await events.publish_state(
            layer,
            group=live.group,
            event=await database_sync_to_async(events.state_event)(
                message=message, seq=seq, live_text=live.text
            ),
        )

    async def consume() -> None:
        nonlocal first_token_at, usage
        api_key, base_url = await database_sync_to_async(reply_secret)(message=message)
        adapter = get_adapter(message.provider)
        summary = None
        # The history is read once, for the summary decision and for the request.
        transcript = await database_sync_to_async(transcript_entries)(message=message)
        plan = await database_sync_to_async(summaries.plan_summary)(
            thread_id=message.thread_id, entries=transcript
        )
        if plan is not None:
            summary = await summaries.ensure_summary(
                plan, adapter=adapter, model=message.model, api_key=api_key,
                base_url=base_url, redis=redis,
            )  # fmt: skip
        request = await database_sync_to_async(request_for_reply)(
            message=message, summary=summary, transcript=transcript
        )
        guard = TurnGuard(own=setup.own_names, others=setup.other_names)
        released = message.turn_id is None
        stream = converse(adapter, request, api_key=api_key, base_url=base_url, run_tool=run_tool)
        async with asyncio.timeout(settings.PARLEY_REPLY_TIMEOUT_SECONDS), aclosing(stream):
            async for event in stream:
                if not released:  # the response has begun: staggered siblings may start
                    released = True
                    await database_sync_to_async(orchestration.turn_release)(message_id=message_pk)
                if isinstance(event, TextDelta) and event.text:
                    if first_token_at is None:
                        first_token_at = time.monotonic()
                    checked = guard.feed(event.text)
                    live.add(checked.text)
                    if checked.ended:
                        return  # it began another participant's turn: close the stream
                elif isinstance(event, ToolCall | ToolResult):
                    live.add_part(event)
                    await show_tool_activity()
                elif isinstance(event, Usage):
                    usage = event
        live.add(guard.finish().text)

    status, error = MessageStatus.DONE, ""
    # The helpers stop on an event, never by cancellation: a cancel landing inside
    # channels-redis's group_send can be swallowed there, and the helper would then run forever.
    stop = asyncio.Event()
    stream_task = asyncio.ensure_future(consume())
    publisher = asyncio.ensure_future(live.run_publisher(stop))
    watcher = asyncio.ensure_future(_watch_cancel(redis, live.message_id, stream_task, stop))
    try:
        await stream_task
    except asyncio.CancelledError:
        if not stream_task.cancelled():
            raise  # this worker itself is being cancelled
        status = MessageStatus.INTERRUPTED
    except ProviderError as exc:
        status, error = MessageStatus.ERROR, str(exc)
    except TimeoutError:
        status = MessageStatus.ERROR
        error = f"The reply took longer than {settings.PARLEY_REPLY_TIMEOUT_SECONDS} s."
    except Exception:
        logger.exception("Reply %s failed unexpectedly", live.message_id)
        status, error = MessageStatus.ERROR, "The reply failed unexpectedly; try again."
    finally:
        stop.set()
        await asyncio.gather(publisher, watcher, return_exceptions=True)

    await live.flush()
    final = await database_sync_to_async(message_finish)(
        message_id=message_pk,
        status=status,
        content=live.content(),
        error=error,
        usage=usage.as_dict(),
        ttft_ms=int((first_token_at - started) * 1000) if first_token_at else None,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    final_seq = await livestate.live_finish(redis, live.message_id)
    await events.publish_state(
        layer,
        group=live.group,
        event=await database_sync_to_async(events.state_event)(message=final, seq=final_seq),
    )
    await events.publish_state(  # the summary strip counts this reply now
        layer,
        group=events.session_group(message.thread.session.public_id),
        event=await database_sync_to_async(events.session_controls_event)(
            session_id=message.thread.session_id
        ),
    )
    restart = status == MessageStatus.INTERRUPTED and await livestate.restart_requested(
        redis, live.message_id
    )
    await livestate.clear_cancel(redis, live.message_id)
    if restart:  # "Apply now": the same reply again, with the session's new settings
        await livestate.lease_release(redis, message_pk, lease)  # the rerun's task takes over
        await database_sync_to_async(reply_rerun)(message=final)
        return
    if message.turn_id is not None:
        await database_sync_to_async(orchestration.turn_advance)(turn_id=message.turn_id)
