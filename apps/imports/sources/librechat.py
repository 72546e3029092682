"""LibreChat's conversation export (a chat's menu → Export → JSON, "include all branches"):
one conversation whose `messages` are either nested (`recursive`: each with its `children`) or
listed with each one's `parentMessageId` (the zero UUID for the first)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from apps.imports.sources.common import (
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

FORMAT = "librechat"
LABEL = "LibreChat"
# How a person gets the export (the Import page lists it).
WHERE = "A chat's menu → Export → JSON, with “include all branches” on."
NO_PARENT = "00000000-0000-0000-0000-000000000000"
MAX_DEPTH = 10_000


def looks_like(item: dict[str, Any]) -> bool:
    return "conversationId" in item and isinstance(item.get("messages"), list)


def conversation(
    item: dict[str, Any], files: Callable[[str], SourceFile | None]
) -> SourceConversation:
    key = item.get("conversationId")
    if not isinstance(key, str) or not key:
        raise BrokenConversation("it has no conversationId")
    given = item.get("options")
    options: dict[str, Any] = given if isinstance(given, dict) else {}
    default_model = clean_model(options.get("model") or item.get("model") or item.get("endpoint"))
    skipped: Counter[str] = Counter()
    if any(isinstance(v, str) and v.strip() for v in (options.get("promptPrefix"),
                                                       item.get("promptPrefix"))):  # fmt: skip
        skipped["the chat's instructions (set them as the session's persona)"] += 1
    messages = []
    for entry, parent in _walk(item["messages"]):
        text = _text(entry, skipped)
        if entry.get("files"):
            skipped["files kept on the LibreChat server (not in the export)"] += len(entry["files"])
        if not text.strip():
            skipped["empty messages"] += 1
            continue
        mine = bool(entry.get("isCreatedByUser"))
        messages.append(
            SourceMessage(
                key=str(entry.get("messageId")),
                parent=parent,
                speaker="user" if mine else "assistant",
                text=text,
                created_at=timestamp(entry.get("createdAt")),
                model=""
                if mine
                else clean_model(entry.get("model")) or default_model or "LibreChat",
            )
        )
    last = messages[-1].key if messages else None
    return SourceConversation(
        key=f"{FORMAT}:{key}",
        title=clean_title(item.get("title")),
        messages=in_tree_order(messages),
        current=_latest_leaf(messages) or last,
        created_at=timestamp(
            item.get("createdAt") or (messages[0].created_at if messages else None)
        ),
        updated_at=timestamp(item.get("exportAt") or item.get("updatedAt")),
        skipped=skipped,
    )


def _walk(entries: list[Any]) -> Iterator[tuple[dict[str, Any], str | None]]:
    """Each message with its parent's id, from either shape (no recursion: a deep tree is fine)."""
    stack: list[tuple[Any, str | None, int]] = [(entry, None, 0) for entry in reversed(entries)]
    while stack:
        entry, nested_parent, depth = stack.pop()
        if not isinstance(entry, dict) or not entry.get("messageId"):
            raise BrokenConversation("a message has no messageId")
        if depth > MAX_DEPTH:
            raise BrokenConversation(f"its messages nest deeper than {MAX_DEPTH:,}")
        parent = entry.get("parentMessageId")
        parent = nested_parent or (str(parent) if parent and parent != NO_PARENT else None)
        yield entry, parent
        children = entry.get("children") or []
        stack.extend((child, str(entry["messageId"]), depth + 1) for child in reversed(children))


def _text(entry: dict[str, Any], skipped: Counter[str]) -> str:
    content = entry.get("content")
    if isinstance(content, list) and content:
        texts = [
            part["text"] if isinstance(part.get("text"), str) else part["text"].get("value", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and part.get("text")
        ]
        if len(texts) < len(content):
            skipped["tool calls and reasoning"] += len(content) - len(texts)
        if texts:
            return clean_text("\n\n".join(t for t in texts if isinstance(t, str)), skipped)
    return clean_text(entry.get("text"), skipped)


def _latest_leaf(messages: list[SourceMessage]) -> str | None:
    parents = {m.parent for m in messages}
    leaves = [m for m in messages if m.key not in parents]
    dated = [m for m in leaves if m.created_at is not None]
    if dated:
        return max(dated, key=lambda m: m.created_at).key  # type: ignore[arg-type,return-value]
    return leaves[-1].key if leaves else None
