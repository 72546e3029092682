"""Chatbot UI's export (Settings → Export data): one JSON object whose `history` lists the
conversations (`version` 4; an older export is the list itself), each a line of `messages`
with a role and its text, the `model` that answered and the chat's own `prompt`. The export
keeps no times and no ids for messages."""

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
    content_key,
)

FORMAT = "chatbotui"
LABEL = "Chatbot UI"
# How a person gets the export (the Import page lists it).
WHERE = "Settings → Export data (chatbot_ui_history.json, or an older export's list)."


def is_export(document: Any) -> bool:
    """The whole file: `{version, history: [...], folders, prompts}`."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("history"), list)
        and ("folders" in document or "version" in document)
    )


def looks_like(item: dict[str, Any]) -> bool:
    return (
        isinstance(item.get("messages"), list)
        and isinstance(item.get("model"), dict)
        and "conversationId" not in item
        and "thread" not in item
    )


def conversation(
    item: dict[str, Any], files: Callable[[str], SourceFile | None]
) -> SourceConversation:
    model = item["model"]
    voice = clean_model(model.get("id") or model.get("name")) or LABEL
    skipped: Counter[str] = Counter()
    prompt = item.get("prompt")
    if isinstance(prompt, str) and prompt.strip():
        skipped["the chat's instructions (set them as the session's persona)"] += 1
    messages: list[SourceMessage] = []
    key = item.get("id")
    if not isinstance(key, str) or not key:
        key = content_key(str(item.get("name")), *(str(m) for m in item["messages"][:3]))
    for position, entry in enumerate(item["messages"]):
        if not isinstance(entry, dict):
            raise BrokenConversation(f"message {position + 1} is not an object")
        role = entry.get("role")
        text = clean_text(entry.get("content"), skipped)
        if role not in ("user", "assistant"):
            skipped["system messages"] += 1
            continue
        if not text.strip():
            skipped["empty messages"] += 1
            continue
        messages.append(SourceMessage(
            key=f"{key}#{position}", parent=messages[-1].key if messages else None,
            speaker=role, text=text, model=voice if role == "assistant" else "",
        ))  # fmt: skip
    return SourceConversation(
        key=f"{FORMAT}:{key}",
        title=clean_title(item.get("name")),
        messages=messages,
        current=messages[-1].key if messages else None,
        skipped=skipped,
    )
