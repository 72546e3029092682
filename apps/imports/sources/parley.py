"""Parley's own thread export (a thread's ⋯ → Export → JSON, or `GET …/export?format=json`): one
thread, its inherited history included, every message with its speaker (a role's handle or
`user`). Importing it back gives the same speakers, texts, models and times."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from apps.imports.sources.common import (
    BrokenConversation,
    SourceConversation,
    SourceFile,
    SourceMessage,
    clean_model,
    clean_text,
    clean_title,
    timestamp,
)

FORMAT = "parley"
LABEL = "Parley"
# How a person gets the export (the Import page lists it).
WHERE = "A thread's Export → JSON, from this server or another."


def looks_like(item: dict[str, Any]) -> bool:
    return isinstance(item.get("thread"), dict) and isinstance(item.get("messages"), list)


def conversation(
    item: dict[str, Any], files: Callable[[str], SourceFile | None]
) -> SourceConversation:
    thread = item["thread"]
    key = thread.get("id")
    if not isinstance(key, str) or not key:
        raise BrokenConversation("its thread has no id")
    skipped: Counter[str] = Counter()
    messages = []
    previous: str | None = None
    for position, entry in enumerate(item["messages"]):
        if not isinstance(entry, dict):
            raise BrokenConversation(f"message {position + 1} is not an object")
        if entry.get("whisper_to"):
            skipped["whispers (they stay with the room they were said in)"] += 1
            continue
        if entry.get("attachments"):
            skipped["attachments (the export links to them on the server it came from)"] += len(
                entry["attachments"]
            )
        speaker = entry.get("speaker")
        if not isinstance(speaker, str) or not speaker or speaker == "parley":
            continue  # Parley's own notices are not in its export; nothing else lacks a speaker
        text = clean_text(
            "".join(
                part.get("text", "")
                for part in entry.get("content") or []
                if isinstance(part, dict) and part.get("type") == "text"
            ),
            skipped,
        )
        if not text.strip():
            skipped["empty or unfinished replies"] += 1
            continue
        own_key = str(entry.get("id") or f"{key}#{position}")
        messages.append(
            SourceMessage(
                key=own_key,
                parent=previous,
                speaker="user" if speaker == "user" else "assistant",
                text=text,
                created_at=timestamp(entry.get("created_at")),
                model="" if speaker == "user" else clean_model(entry.get("model")),
                voice="" if speaker == "user" else clean_model(speaker)[:40],
            )
        )
        previous = own_key
    return SourceConversation(
        key=f"{FORMAT}:{key}",
        title=clean_title(thread.get("label") or thread.get("session")),
        messages=messages,
        current=previous,
        created_at=messages[0].created_at if messages else timestamp(thread.get("exported_at")),
        updated_at=messages[-1].created_at if messages else None,
        skipped=skipped,
    )
