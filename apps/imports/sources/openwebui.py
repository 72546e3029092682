"""Open WebUI's chat export (Settings → Chats → Export chats, or a chat's ⋯ → Download →
Export chat (.json)): a list of chats, each with `chat.history.messages`, a tree by `parentId`
(a regenerated answer or an edited question is a sibling) and `currentId` the leaf shown.
Images the person sent are data URLs in a message's `files`."""

from __future__ import annotations

import base64
import binascii
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
    in_tree_order,
    timestamp,
)

FORMAT = "openwebui"
LABEL = "Open WebUI"


def looks_like(item: dict[str, Any]) -> bool:
    chat = item.get("chat")
    return isinstance(chat, dict) and ("history" in chat or "messages" in chat)


def conversation(
    item: dict[str, Any], files: Callable[[str], SourceFile | None]
) -> SourceConversation:
    chat = item["chat"]
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
    messages = []
    for entry_key, entry in entries.items():
        if not isinstance(entry, dict):
            raise BrokenConversation(f"message {str(entry_key)[:40]!r} is not an object")
        role = entry.get("role")
        if role not in ("user", "assistant"):
            skipped["system messages"] += 1
            continue
        text = clean_text(entry.get("content"), skipped)
        attached = _images(entry, skipped)
        if not text.strip() and not attached:
            skipped["empty messages"] += 1
            continue
        parent = entry.get("parentId")
        messages.append(
            SourceMessage(
                key=str(entry_key),
                parent=str(parent) if parent else None,
                speaker=role,
                text=text,
                created_at=timestamp(entry.get("timestamp")),
                model=clean_model(entry.get("modelName") or entry.get("model") or default_model)
                if role == "assistant"
                else "",
                files=attached,
            )
        )
    current = history.get("currentId") if isinstance(history, dict) else None
    return SourceConversation(
        key=f"{FORMAT}:{key}",
        title=clean_title(item.get("title") or chat.get("title")),
        messages=in_tree_order(messages),
        current=str(current) if current else None,
        created_at=timestamp(item.get("created_at") or chat.get("timestamp")),
        updated_at=timestamp(item.get("updated_at")),
        skipped=skipped,
    )


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
