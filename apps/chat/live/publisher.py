"""The published state of one streaming reply: received text, what has gone out, tool parts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from apps.chat.display import events
from apps.chat.models import Message
from apps.chat.records.text import storable, storable_parts
from apps.providers.types import ToolCall, ToolResult


class LiveReply:
    """One reply while it streams. The hub publishes its text; the engine feeds it.

    `published` only moves once a chunk is in the Redis tail, so a failed publish is retried
    with the next one and the tail never misses text.
    """

    def __init__(self, *, message: Message, lease: str) -> None:
        self.message = message
        self.message_pk = message.pk
        self.message_id = str(message.public_id)
        self.group = events.thread_group(message.thread.public_id)
        self.lease = lease
        self.text = ""  # everything received
        self.parts: list[dict[str, Any]] = []  # tool calls and results between text runs
        self.text_in_parts = 0
        self.published = 0  # how much of `text` is in the tail and on its way to the tabs
        self.seq = 0  # the last sequence number sent to the tabs
        self.first_out = 0.0  # when the first text went out alone (monotonic)
        self.checkpointed = 0
        self.last_checkpoint = time.monotonic()
        self.publishing = asyncio.Lock()  # one publish of this reply at a time, in order
        self.stream_task: asyncio.Task | None = None  # what an interrupt cancels
        self.lease_lost = False  # another run took the reply over: stop without settling
        self.handed_over = False  # this worker is stopping: give the reply to another
        # The reply's event log: kept in memory, written with its final state (never per
        # token); an earlier run's entries (a takeover) come first.
        self.log: list[dict[str, Any]] = list(message.log or [])
        self.log_started = time.monotonic()

    def note(self, event: str, detail: str = "", **extra: Any) -> None:
        """Add an entry to the reply's event log, timed from this run's start."""
        t = int((time.monotonic() - self.log_started) * 1000)
        self.log.append({"t": t, "event": event, **({"detail": detail} if detail else {}), **extra})

    def resume_from(self, text: str) -> None:
        """Continue a reply taken over from a dead worker: `text` is already out everywhere."""
        self.text = text
        self.published = self.checkpointed = len(text)

    def add(self, chunk: str) -> bool:
        """Take received text; True for the reply's first text (published at once)."""
        chunk = storable(chunk)
        first = not self.text and bool(chunk)
        self.text += chunk
        return first

    @property
    def unpublished(self) -> str:
        # Blanks at the end wait for the text after them: the stored reply ends without them,
        # so what the tabs and API streams are sent adds up to exactly what is stored.
        # (Scanned from the end: copying the whole text every tick would cost a long reply.)
        end = len(self.text)
        while end > self.published and self.text[end - 1].isspace():
            end -= 1
        return self.text[self.published : end]

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
            if event.trimmed is not None:  # the model saw less: keep what, for later requests
                part["sent"] = event.trimmed
        self.parts.append(storable_parts(part))

    def content(self) -> list[dict[str, Any]]:
        """The canonical parts of the reply: text runs and tool activity in order."""
        parts = list(self.parts)
        tail = self.text[self.text_in_parts :].rstrip()
        if tail:
            parts.append({"type": "text", "text": tail})
        return parts

    def checkpoint_due(self, now: float, every: float) -> bool:
        return self.checkpointed != len(self.text) and now - self.last_checkpoint >= every
