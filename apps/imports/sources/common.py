"""What every source's conversation becomes before Parley writes it: a tree of messages, the
branch the person last looked at, and what was left out and why. Pure data: no database."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apps.chat.records.text import storable

MAX_TITLE_CHARS = 120
# A message longer than this is cut (and said so): far above what a person pastes, well below
# what would make one row a problem.
MAX_MESSAGE_CHARS = 1_000_000
MAX_MODEL_CHARS = 120
MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024
MAX_KEY_CHARS = 200  # what ImportedConversation.key holds; a longer id is kept as its hash
# Times outside these are not real (a hand-edited file, a clock at zero): the message is kept
# without its time, and a page never meets a date Python cannot show.
EARLIEST = datetime(1990, 1, 1, tzinfo=UTC)
LATEST_AHEAD = timedelta(days=2)


class BrokenConversation(ValueError):
    """One conversation cannot be read; the rest of the file still can."""


@dataclass
class SourceFile:
    """An attachment the source kept: bytes (an image in the export) or extracted text."""

    name: str
    data: bytes


@dataclass
class SourceMessage:
    key: str
    parent: str | None
    speaker: str  # "user" or "assistant"
    text: str
    created_at: datetime | None = None
    model: str = ""
    files: list[SourceFile] = field(default_factory=list)
    # Who answered, as the source names them: a role's handle in Parley's export, else the
    # model. Each voice goes to one role, chosen in the preview.
    voice: str = ""
    interrupted: bool = False  # a reply the person stopped: it comes in as stopped

    @property
    def speaks_as(self) -> str:
        return self.voice or self.model


@dataclass
class SourceConversation:
    """One conversation: its messages in the order they were written (a parent before its
    children) and the leaf the person last looked at (the main thread ends there)."""

    key: str  # stable across exports of the same conversation: what makes a second import a no-op
    title: str
    messages: list[SourceMessage]
    current: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    skipped: Counter[str] = field(default_factory=Counter)  # why -> how many

    @property
    def voices(self) -> list[str]:
        return sorted({m.speaks_as for m in self.messages if m.speaker == "assistant"})


def clean_text(value: Any, skipped: Counter[str] | None = None) -> str:
    text = storable(value if isinstance(value, str) else "")
    if len(text) > MAX_MESSAGE_CHARS:
        if skipped is not None:
            skipped[f"text past {MAX_MESSAGE_CHARS:,} characters in a message (cut)"] += 1
        text = text[:MAX_MESSAGE_CHARS]
    return text


def clean_title(value: Any) -> str:
    title = " ".join(storable(value if isinstance(value, str) else "").split())
    return title[:MAX_TITLE_CHARS] or "Imported chat"


def clean_model(value: Any) -> str:
    return " ".join(storable(value if isinstance(value, str) else "").split())[:MAX_MODEL_CHARS]


def timestamp(value: Any) -> datetime | None:
    """Seconds or milliseconds since the epoch, or an ISO 8601 string, in UTC; None when
    neither, or when outside 1990 to the day after tomorrow."""
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float) or hasattr(value, "as_integer_ratio"):
            seconds = float(value)
            if seconds > 1e11:  # milliseconds (or later than the year 5138)
                seconds /= 1000
            moment = datetime.fromtimestamp(seconds, tz=UTC)
        elif isinstance(value, str) and value:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            moment = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    if not EARLIEST <= moment <= datetime.now(UTC) + LATEST_AHEAD:
        return None
    return moment


def stable_key(key: str) -> str:
    """A conversation's key as stored: a source id too long for the column becomes its hash
    (the same id, the same key)."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    return content_key(key)


def inherit_times(conversation: SourceConversation) -> None:
    """Messages the source gave no time take their neighbours': the message before them in
    the tree, else the next one that has a time, else the conversation's; the conversation
    without times takes its messages' first and last. Nothing is invented: a conversation
    with no time anywhere keeps none."""
    messages = conversation.messages
    by_key = {m.key: m for m in messages}
    for message in messages:  # parents before children
        if message.created_at is None:
            parent = by_key.get(message.parent or "")
            message.created_at = parent.created_at if parent else None
    following = None
    for message in reversed(messages):
        if message.created_at is None:
            message.created_at = following or conversation.created_at
        following = message.created_at or following
    times = [m.created_at for m in messages if m.created_at is not None]
    if times:
        conversation.created_at = conversation.created_at or min(times)
        conversation.updated_at = conversation.updated_at or max(times)


def content_key(*parts: str) -> str:
    """A key for a conversation its source gave no id: the same text makes the same key."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "replace"))
        digest.update(b"\x00")
    return "sha256:" + digest.hexdigest()[:40]


def keep_kept(
    nodes: list[tuple[str, str | None, SourceMessage | None]],
) -> list[SourceMessage]:
    """The kept messages of a source tree whose dropped nodes (tool output, hidden system
    lines, empty roots) are None: each kept message's parent becomes its nearest kept ancestor.
    `nodes` are (key, parent key, message or None), in any order."""
    parent_of = {key: parent for key, parent, _ in nodes}
    kept = {key: message for key, _, message in nodes if message is not None}

    def nearest_kept(key: str | None) -> str | None:
        seen = 0
        while key is not None and key not in kept:
            key = parent_of.get(key)
            seen += 1
            if seen > len(parent_of):  # a cycle in a hand-edited file
                raise BrokenConversation("its messages' parents form a loop")
        return key

    for key, message in kept.items():
        message.key, message.parent = key, nearest_kept(parent_of[key])
    return in_tree_order(list(kept.values()))


def in_tree_order(messages: list[SourceMessage]) -> list[SourceMessage]:
    """Parents before children, siblings in the order they were written (then as listed).
    Two messages with one id are refused: the tree they make is not the source's."""
    by_key = {m.key: m for m in messages}
    if len(by_key) < len(messages):
        repeated = next(key for key, n in Counter(m.key for m in messages).items() if n > 1)
        raise BrokenConversation(f"two of its messages have the same id ({repeated[:40]!r})")
    children: dict[str | None, list[SourceMessage]] = {}
    for position, message in enumerate(messages):
        parent = message.parent if message.parent in by_key else None
        message.parent = parent
        children.setdefault(parent, []).append(message)
        message._position = position  # type: ignore[attr-defined]

    def order(m: SourceMessage) -> tuple[float, int]:
        when = m.created_at.timestamp() if m.created_at else float("inf")
        return (when, m._position)  # type: ignore[attr-defined]

    ordered: list[SourceMessage] = []
    stack = sorted(children.get(None, []), key=order, reverse=True)
    while stack:
        message = stack.pop()
        ordered.append(message)
        stack.extend(sorted(children.get(message.key, []), key=order, reverse=True))
    for message in messages:
        del message._position  # type: ignore[attr-defined]
    if len(ordered) < len(messages):
        raise BrokenConversation("its messages' parents form a loop")
    return ordered
