"""Streams one role's reply on the worker's hub: provider → Redis live tail and live bus → DB.

Every reply of a worker process runs on the hub's one event loop (`hub.py`), which publishes
the received text (the first at once, then on its tick), checkpoints it, renews the reply's
lease and cancels the stream on an interrupt. This module is the life of one reply: lease,
claim, request, stream, settle, and what the turn does next.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from contextlib import aclosing

from django.conf import settings

from apps.chat import livestate
from apps.chat.council import orchestration, summaries, tools
from apps.chat.council.attachment_parts import media_summary
from apps.chat.council.descriptions import describe_images, described_note
from apps.chat.council.dispatch import enqueue_reply
from apps.chat.council.intent import intent_from_model, with_format_rule
from apps.chat.council.replies import reply_rerun, reply_settle, reply_settled_next
from apps.chat.council.requests import request_for_reply
from apps.chat.council.starting import ReplyStart, reply_start, reread_history
from apps.chat.council.turn_guard import TurnGuard
from apps.chat.display import events
from apps.chat.live.hub import StreamHub, in_db_thread, stream_hub
from apps.chat.live.overlap import RepeatTrimmer
from apps.chat.live.publisher import LiveReply
from apps.chat.models import TIMED_OUT, Message, MessageStatus
from apps.chat.records.replies import message_fail_unsaved, reply_is_queued
from apps.chat.records.text import storable
from apps.connectors import client as mcp_client
from apps.ops import metrics
from apps.providers.calls import converse
from apps.providers.crypto import scrub
from apps.providers.registry import get_adapter
from apps.providers.types import (
    ChatRequest,
    Milestone,
    ProviderError,
    Stop,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
)

logger = logging.getLogger(__name__)
LEASE_WAIT_POLL_SECONDS = 0.1


def run_reply_on_hub(message_pk: int) -> None:
    """Stream a reply on this process's hub and wait until it has settled (a task's thread)."""
    hub = stream_hub()
    hub.run(stream_reply(hub, message_pk))


async def stream_reply(hub: StreamHub, message_pk: int) -> None:
    """Claim, stream, publish and settle one queued reply. Safe to run twice for one message."""
    # The lease comes first: a redelivered or recovered task for a reply that a live worker is
    # streaming must not restart it under that worker's feet.
    if hub.handing_over:  # this worker is stopping: another one runs it
        await in_db_thread(enqueue_reply)(message_pk)
        return
    lease = uuid.uuid4().hex
    if not await _lease_when_free(hub, message_pk, lease):
        return
    hub.leases[message_pk] = lease  # renewed by the process's heartbeat from now on
    try:
        start = await in_db_thread(reply_start)(message_id=message_pk)
        if start is not None and start.claim.gave_up:
            await _announce_final(hub, start.claim.message, after_seq=events.SETTLED_SEQ - 1)
        elif start is not None:
            await ReplyRun(hub, start, lease).run()
    finally:
        hub.leases.pop(message_pk, None)
        await livestate.lease_release(hub.redis, message_pk, lease)


async def _lease_when_free(hub: StreamHub, message_pk: int, lease: str) -> bool:
    """Take the reply's lease, waiting while a previous run of a re-queued reply finishes.

    A held lease on a `queued` reply means its earlier run (now settled, then retried or
    regenerated) has not yet let go; on a `streaming` reply it means a live duplicate, which
    this task must leave alone. A dead holder's lease lapses within its TTL.
    """
    deadline = time.monotonic() + livestate.LEASE_TTL_SECONDS + 5
    while not await livestate.lease_acquire(hub.redis, message_pk, lease):
        queued = await in_db_thread(reply_is_queued)(message_id=message_pk)
        if not queued or time.monotonic() > deadline:
            return False
        await asyncio.sleep(LEASE_WAIT_POLL_SECONDS)
    return True


async def _publish_state(hub: StreamHub, group: str, message: Message, **state) -> None:
    event = await in_db_thread(events.state_event)(message=message, **state)
    await events.publish_state(hub.redis, group=group, event=event)


async def _resumed_text(hub: StreamHub, message: Message) -> str:
    """What a taken-over reply continues from: everything the tabs were shown (the Redis
    tail) when it still extends the last checkpoint, otherwise the checkpoint."""
    snapshot = await livestate.live_snapshot(hub.redis, str(message.public_id))
    return livestate.text_shown(saved=message.text, tail=snapshot.text if snapshot else None)


class ReplyRun:
    """One claimed reply on the hub, in steps: show where it starts, build its request, stream
    it (text through the repeat trimmer and the turn guard, tools, milestones), end it."""

    def __init__(self, hub: StreamHub, start: ReplyStart, lease: str) -> None:
        assert start.setup is not None  # a claim that was not given up
        self.hub, self.start, self.setup = hub, start, start.setup
        self.message = start.claim.message
        self.live = LiveReply(message=self.message, lease=lease)
        self.started = time.monotonic()
        self.first_token_at: float | None = None
        self.usage, self.stop = Usage(), Stop("other")
        self.resume_text = ""
        self.joining = self.sentence_ended = False
        self.repeats = RepeatTrimmer("")
        self.guard = TurnGuard(own=self.setup.own_names, others=self.setup.other_names)

    async def run(self) -> None:
        await self.show_start()
        ending = await self.stream()
        if ending is not None:  # None: handed to another worker, or taken over
            await self.settle(*ending)

    async def show_start(self) -> None:
        """Reset the live tail (a taken-over reply keeps every word already shown and asks
        the model to go on from it) and show the bubble streaming on every tab."""
        hub, live, message = self.hub, self.live, self.message
        if self.start.claim.resumed:
            self.resume_text = await _resumed_text(hub, message)
        live.resume_from(self.resume_text)
        live.note("started", f"{message.provider} · {message.model}")
        if self.start.claim.resumed:
            live.note(
                "takeover", f"continues from {len(self.resume_text)} characters already shown"
            )
        live.seq = await livestate.live_reset(hub.redis, live.message_id, self.resume_text)
        if self.start.streaming_event is not None:  # rendered with the claim: the bubble
            streaming = {**self.start.streaming_event, "seq": live.seq, "reset": False}
            await events.publish_state(hub.redis, group=live.group, event=streaming)
        else:
            await _publish_state(hub, live.group, message, seq=live.seq,
                                 live_text=self.resume_text)  # fmt: skip
        # The continuation's leading blanks would double the ones the cut-off text ends with,
        # and what it repeats of the cut-off text (models often start again) is dropped. Text
        # shown ends without blanks (they wait for the words after them): a continuation that
        # starts a new sentence right after a full stop gets the space back.
        self.joining = self.resume_text[-1:].isspace()
        self.sentence_ended = self.resume_text[-1:] in (".", "!", "?", ":", ";")
        self.repeats = RepeatTrimmer(self.resume_text)

    async def request(self, adapter) -> ChatRequest:
        """The request, with the history's summary first when it is long, and the format
        the cheap model reads from the person's message when the rules were unsure."""
        start, live = self.start, self.live
        request, plan = start.request, start.summary_plan
        if start.media is not None and start.media.undescribed:
            await describe_images(start.media.undescribed, message=self.message,
                                  redis=self.hub.redis)  # fmt: skip
            start.media, start.transcript = await in_db_thread(reread_history)(message=self.message)
        if start.media is not None and start.media.described_by:
            live.note("described", described_note(start.media.described_by))
        if request is None:
            summary = None if plan is None else await summaries.ensure_summary(
                plan, adapter=adapter, model=self.message.model, api_key=start.api_key,
                base_url=start.base_url, auth=start.auth, redis=self.hub.redis,
            )  # fmt: skip
            request = await in_db_thread(request_for_reply)(
                message=self.message,
                summary=summary,
                transcript=start.transcript,
                media=start.media,
            )
        assert request is not None
        if request.metadata.get("ask_intent") and self.message.turn_id:
            intent = await intent_from_model(
                turn_id=self.message.turn_id, text=request.metadata["ask_intent"],
                adapter=adapter, api_key=start.api_key, base_url=start.base_url,
                auth=start.auth, redis=self.hub.redis,
            )  # fmt: skip
            if intent:
                request = with_format_rule(request, intent)
                live.note("format", f"asked for {intent} (the cheap model's reading)")
        elif request.metadata.get("format"):
            live.note("format", f"asked for {request.metadata['format']}")
        if request.metadata.get("library"):
            live.note("library", ", ".join(request.metadata["library"]))
        if request.metadata.get("lore"):
            live.note("lore", ", ".join(request.metadata["lore"]))
        if request.metadata.get("cache_ttl"):
            live.note("cache_ttl", request.metadata["cache_ttl"])
        if attached := media_summary(request):
            live.note("attachments", attached)
        return request

    async def consume(self) -> None:
        """Stream the model's answer into the live reply until it ends (or the guard ends it)."""
        start, live = self.start, self.live
        adapter = get_adapter(self.message.provider)
        request = await self.request(adapter)
        released = self.message.turn_id is None
        stream = converse(
            adapter, request, api_key=start.api_key, base_url=start.base_url, auth=start.auth,
            run_tool=self.run_tool, resume_text=self.resume_text,
            result_item_chars=settings.PARLEY_TOOL_ITEM_CHARS,
            result_round_chars=settings.PARLEY_TOOL_ROUND_CHARS,
        )  # fmt: skip
        async with asyncio.timeout(settings.PARLEY_REPLY_TIMEOUT_SECONDS), aclosing(stream):
            async for event in stream:
                if not released:  # the response has begun: staggered siblings may start
                    released = True  # (beside the stream: its first text must not wait)
                    self.hub.run_errand(self.release_siblings(), "start the rest of a stage")
                if isinstance(event, TextDelta) and event.text:
                    if self.first_token_at is None:
                        self.first_token_at = time.monotonic()
                        live.note("first_token")
                    if self.take(self.repeats.feed(event.text)):
                        live.note("guard", "began another participant's turn: stopped there")
                        return  # it began another participant's turn: close the stream
                elif isinstance(event, ToolCall | ToolResult):
                    if self.take(self.repeats.finish()):
                        return
                    live.add_part(event)
                    _note_tool(live, event)
                    await self.show_tool_activity()
                elif isinstance(event, Milestone):
                    live.note(event.kind, event.detail)
                elif isinstance(event, Usage):
                    self.usage = event
                elif isinstance(event, Stop):
                    self.stop = event
        if not self.take(self.repeats.finish()):
            live.add(self.guard.finish().text)

    def take(self, text: str) -> bool:
        """Pass text on to the tabs; True once the guard ends the reply."""
        text = text.lstrip() if self.joining else text
        if not text:
            return False
        if self.sentence_ended and text[:1].isalnum():
            text = " " + text
        self.joining = self.sentence_ended = False
        checked = self.guard.feed(text)
        self.hub.text_arrived(self.live, first=self.live.add(checked.text))
        return checked.ended

    async def run_tool(self, call: ToolCall) -> str:
        outcome = await in_db_thread(tools.run_tool)(self.setup.tool_context, call)
        if not isinstance(outcome, tools.McpCall):
            return outcome
        # An MCP server's tool: connected for this call, within its timeout; a server that
        # is down, slow or crashes is an error the model reads, never the end of the reply.
        try:
            text, failed = await mcp_client.call_tool(outcome.spec, outcome.tool, outcome.arguments)
        finally:  # a copy of the workspace (on object storage) goes back, what was kept
            unkept = await in_db_thread(outcome.workspace.check_in)() if outcome.workspace else ""
        if unkept:
            text = f"{text}\n\n(Not kept in the workspace: {unkept})"
        if failed:
            raise mcp_client.McpUnavailable(storable(text) or "The tool reported an error.")
        return storable(text)

    async def show_tool_activity(self) -> None:
        """Tool calls and results appear in the bubble while the reply goes on."""
        live = self.live
        async with live.publishing:
            await self.hub.flush_locked(live)
            seq = await self.hub.state_seq(live)
            self.message.content = live.content()
            await _publish_state(self.hub, live.group, self.message, seq=seq, live_text=live.text)

    async def release_siblings(self) -> None:
        # After the first text is out: starting the siblings holds the GIL for milliseconds.
        await self.hub.flush_first(self.live)
        await in_db_thread(orchestration.turn_release)(message_id=self.message.pk)

    async def stream(self) -> tuple[str, str, bool] | None:
        """Run `consume` as the task an interrupt cancels: (status, error, timed out), or None
        when the reply is no longer this run's to end (handed over, or taken over)."""
        hub, live = self.hub, self.live
        status, error, timed_out = MessageStatus.DONE, "", False
        live.stream_task = asyncio.ensure_future(self.consume())
        await hub.attach(live)
        try:
            await live.stream_task
        except asyncio.CancelledError:
            if not live.stream_task.cancelled():
                raise  # the hub itself is being cancelled
            status = MessageStatus.INTERRUPTED
            if live.handed_over and not live.lease_lost:
                hub.detach(live)
                await hub.give_back(live)
                return None
        except ProviderError as exc:  # providers quote keys back (401 bodies do): never kept
            status, error = MessageStatus.ERROR, scrub(str(exc), self.start.api_key)
            timed_out = exc.error_type == "timeout" or exc.status in (408, 504)
        except TimeoutError:
            status, timed_out = MessageStatus.ERROR, True
            error = f"The reply took longer than {settings.PARLEY_REPLY_TIMEOUT_SECONDS} s."
        except Exception:
            logger.exception("Reply %s failed unexpectedly", live.message_id)
            status, error = MessageStatus.ERROR, "The reply failed unexpectedly; try again."
        finally:
            hub.detach(live)
        if live.lease_lost:
            return None  # the run that took this reply over settles it
        return status, error, timed_out

    async def settle(self, status: str, error: str, timed_out: bool) -> None:
        """Publish the last text, then store and show the reply's final state."""
        live, stop = self.live, self.stop
        await self.hub.flush(live)
        recorded = self.usage.as_dict()
        if self.repeats.trimmed:  # kept with the usage: how often models restart their answer
            recorded["repeat_trimmed_chars"] = self.repeats.trimmed
            live.note("trimmed", f"{self.repeats.trimmed} repeated characters dropped")
            logger.info("Reply %s: dropped %d repeated characters after a takeover",
                        live.message_id, self.repeats.trimmed)  # fmt: skip
        done = status == MessageStatus.DONE
        live.note(status, error[:200] if error else stop.reason if done else "")
        first = self.first_token_at
        ttft_ms = int((first - self.started) * 1000) if first else None
        duration_ms = int((time.monotonic() - self.started) * 1000)
        metrics.reply_settled(provider=self.message.provider, status=status, usage=recorded,
                              ttft_ms=ttft_ms, duration_ms=duration_ms)  # fmt: skip
        await _settle(
            self.hub, live, self.message, status=status, error=error, usage=recorded,
            ttft_ms=ttft_ms, duration_ms=duration_ms,
            stop_reason=TIMED_OUT if timed_out else stop.reason if done else "",
            continuations=stop.continuations, log=live.log,
        )  # fmt: skip


def _note_tool(live: LiveReply, event: ToolCall | ToolResult) -> None:
    """A tool call or result in the reply's event log, by its size (not its content)."""
    if isinstance(event, ToolCall):
        size = len(json.dumps(event.arguments, ensure_ascii=False))
        live.note("tool_call", event.name, size=size)
    else:
        extra = {"trimmed_to": len(event.trimmed)} if event.trimmed else {}
        live.note("tool_result", event.name, size=len(event.content), error=event.is_error, **extra)


async def _settle(
    hub: StreamHub, live: LiveReply, message: Message, *, status: str, error: str, **timings
) -> None:
    """Store the reply's final state and let the turn go on, then show it everywhere."""
    # "Apply now": the same reply runs again with the session's new settings, in this turn.
    restart = status == MessageStatus.INTERRUPTED and await livestate.restart_requested(
        hub.redis, live.message_id
    )
    try:
        final, state = await in_db_thread(reply_settle)(
            message_id=message.pk, status=status, content=live.content(), error=error,
            **timings,
        )  # fmt: skip
    except Exception as exc:  # the reply still ends, with its checkpointed text
        logger.exception("Could not save the final state of reply %s", live.message_id)
        final = await in_db_thread(message_fail_unsaved)(
            message_id=message.pk, reason=type(exc).__name__
        )
        await _announce_final(hub, final, after_seq=live.seq)
        return
    if restart:
        await _publish_final(hub, final, after_seq=live.seq, state=state)
        await livestate.clear_cancel(hub.redis, live.message_id)
        hub.leases.pop(message.pk, None)  # the rerun takes over
        await livestate.lease_release(hub.redis, message.pk, live.lease)
        await in_db_thread(reply_rerun)(message=final)
        return
    try:
        await _publish_final(hub, final, after_seq=live.seq, state=state)
        await livestate.clear_cancel(hub.redis, live.message_id)
    except Exception:  # Redis is away: the tabs' resync shows it once Redis is back
        logger.warning("Could not push the final state of reply %s", final.public_id)
    if final.turn_id is not None:
        await in_db_thread(reply_settled_next)(turn_id=final.turn_id)


async def _publish_final(
    hub: StreamHub, final: Message, *, after_seq: int, state: dict | None = None
) -> None:
    """The final full replace, outranking every delta, on every tab of the thread."""
    message_id = str(final.public_id)
    final_seq = await livestate.live_finish(hub.redis, message_id, at_least=after_seq + 1)
    if state is None:
        state = await in_db_thread(events.state_event)(message=final, seq=final_seq)
    state = {**state, "seq": final_seq, "reset": False}
    await events.publish_state(
        hub.redis, group=events.thread_group(final.thread.public_id), event=state
    )
    # The summary strip, the sidebars' unread count and the thread's usage line count it soon.
    hub.counts_changed(final.thread_id)


async def _announce_final(hub: StreamHub, final: Message, *, after_seq: int) -> None:
    """Show a settled reply everywhere and let its turn go on."""
    try:
        await _publish_final(hub, final, after_seq=after_seq)
        await livestate.clear_cancel(hub.redis, str(final.public_id))
    except Exception:  # Redis is away: tabs catch up when they reconnect; the turn goes on
        logger.warning("Could not push the final state of reply %s", final.public_id)
    if final.turn_id is not None:
        await in_db_thread(reply_settled_next)(turn_id=final.turn_id)
