"""Open WebUI's chat export (Settings → Chats → Export chats, or a chat's ⋯ → Download →
Export chat (.json)): a list of chats, each with `chat.history.messages`, a tree by `parentId`
(a regenerated answer or an edited question is a sibling) and `currentId` the leaf shown.
Images the person sent are data URLs in a message's `files`."""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from apps.imports.sources.common import (
    MAX_ATTACHMENT_BYTES,
    BrokenConversation,
    SourceConversation,
    SourceFile,
    SourceMessage,
    clean_model,
    clean_text,
    clean_title,
    keep_kept,
    timestamp,
)

FORMAT = "openwebui"
LABEL = "Open WebUI"
# How a person gets the export (the Import page lists it).
WHERE = (
    "Settings → Chats → Export chats (all of them), or a chat's ⋯ → Download → Export chat (.json)."
)


def looks_like(item: dict[str, Any]) -> bool:
    """A chat as the export lists it (`{id, chat: {history, …}}`), or one chat by itself
    (`{id, title, models, history}`: what Open WebUI's own Import takes and converters write)."""
    chat = item.get("chat")
    if isinstance(chat, dict):
        return "history" in chat or "messages" in chat
    history = item.get("history")
    return isinstance(history, dict) and isinstance(history.get("messages"), dict)


def conversation(
    item: dict[str, Any], files: Callable[[str], SourceFile | None]
) -> SourceConversation:
    chat = item["chat"] if isinstance(item.get("chat"), dict) else item
    key = item.get("id") or chat.get("id")
    if not isinstance(key, str) or not key:
        raise BrokenConversation("it has no id")
    history = chat.get("history") or {}
    entries = history.get("messages") if isinstance(history, dict) else None
    if not isinstance(entries, dict):  # an older export: only the shown line of messages
        listed = chat.get("messages") or []
        entries, previous = {}, None
        for entry in listed if isinstance(listed, list) else []:
            if isinstance(entry, dict) and entry.get("id"):
                entries[str(entry["id"])] = {**entry, "parentId": previous}
                previous = str(entry["id"])
    skipped: Counter[str] = Counter()
    default_model = next(iter(chat.get("models") or []), "")
    # Dropped messages stay nodes of the tree, so their children keep their place.
    nodes: list[tuple[str, str | None, SourceMessage | None]] = []
    for entry_key, entry in entries.items():
        if not isinstance(entry, dict):
            raise BrokenConversation(f"message {str(entry_key)[:40]!r} is not an object")
        parent = entry.get("parentId")
        parent = str(parent) if parent else None
        role = entry.get("role")
        if role not in ("user", "assistant"):
            skipped["system messages"] += 1
            nodes.append((str(entry_key), parent, None))
            continue
        text = _answer(entry, skipped)
        attached = _images(entry, skipped)
        if not text.strip() and not attached:
            skipped["empty messages"] += 1
            nodes.append((str(entry_key), parent, None))
            continue
        model = entry.get("modelName") or entry.get("model") or default_model
        nodes.append((str(entry_key), parent, SourceMessage(
            key=str(entry_key), parent=parent, speaker=role, text=text,
            created_at=timestamp(entry.get("timestamp")),
            model=clean_model(model) if role == "assistant" else "", files=attached,
        )))  # fmt: skip
    messages = keep_kept(nodes)
    current = history.get("currentId") if isinstance(history, dict) else None
    return SourceConversation(
        key=f"{FORMAT}:{key}",
        title=clean_title(item.get("title") or chat.get("title")),
        messages=messages,
        current=str(current) if current else None,
        created_at=timestamp(item.get("created_at") or chat.get("timestamp")),
        updated_at=timestamp(item.get("updated_at")),
        skipped=skipped,
    )


# Open WebUI writes a model's reasoning and its tool calls into the message's text as
# <details type="reasoning"|"tool_calls" …>…</details> blocks.
DETAILS = re.compile(
    r"<details\s+type=\"(reasoning|tool_calls|code_interpreter)\"[^>]*>.*?</details>\s*",
    re.DOTALL,
)
TOOLS = "tool calls and their results"
LEFT_OUT = {"reasoning": "the model's private reasoning", "tool_calls": TOOLS,
            "code_interpreter": TOOLS}  # fmt: skip


def _answer(entry: dict[str, Any], skipped: Counter[str]) -> str:
    """The message's words: the clean answer of `output[]` when the export has it, else its
    `content` without the reasoning and tool-call blocks (each counted as left out)."""
    output = entry.get("output")
    if isinstance(output, list) and output:
        texts = []
        for item in output:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                parts = [p for p in item.get("content") or [] if isinstance(p, dict)]
                texts += [p["text"] for p in parts if isinstance(p.get("text"), str)]
            elif item.get("type") == "reasoning":
                skipped[LEFT_OUT["reasoning"]] += 1
            else:
                skipped[LEFT_OUT["tool_calls"]] += 1
        if texts:
            return clean_text("\n\n".join(texts), skipped)
    content = entry.get("content")
    if isinstance(content, str) and "<details" in content:
        for kind in DETAILS.findall(content):
            skipped[LEFT_OUT[kind]] += 1
        content = DETAILS.sub("", content)
    return clean_text(content, skipped)


def _images(entry: dict[str, Any], skipped: Counter[str]) -> list[SourceFile]:
    attached = []
    for number, file in enumerate(entry.get("files") or [], start=1):
        url = file.get("url") if isinstance(file, dict) else None
        if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
            try:
                data = base64.b64decode(url.split(";base64,", 1)[1], validate=False)
            except (binascii.Error, ValueError):
                skipped["attachments that could not be decoded"] += 1
                continue
            if len(data) > MAX_ATTACHMENT_BYTES:
                skipped["attachments over 32 MB"] += 1
                continue
            name = str(file.get("name") or f"image-{number}")
            attached.append(SourceFile(name=name, data=data))
        else:
            skipped["files kept on the Open WebUI server (not in the export)"] += 1
    return attached
