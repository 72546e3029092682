"""Claude's data export (claude.ai → Settings → Privacy → Export data): `conversations.json`,
a list of conversations with their `chat_messages` in order (a newer export names each one's
`parent_message_uuid`, so an edit or a retry is a branch). Files the person attached are kept as
the text Claude read from them (`extracted_content`); the export holds no image bytes."""

from __future__ import annotations

import re
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
    keep_kept,
    timestamp,
)

FORMAT = "claude"
LABEL = "Claude"
# How a person gets the export (the Import page lists it).
WHERE = (
    "Settings → Privacy → Export data. Send the .zip or its conversations.json (text "
    "from attached files comes along; the export holds no images)."
)
MODEL = "Claude"  # the export does not say which model answered
ROOT = "00000000-0000-4000-8000-000000000000"


def looks_like(item: dict[str, Any]) -> bool:
    return isinstance(item.get("chat_messages"), list)


def conversation(
    item: dict[str, Any], files: Callable[[str], SourceFile | None]
) -> SourceConversation:
    key = item.get("uuid")
    if not isinstance(key, str) or not key:
        raise BrokenConversation("it has no uuid")
    skipped: Counter[str] = Counter()
    # Every message, kept or not, stays a node of the tree: the child of a dropped one (an
    # empty message, a person who sent only a file) is re-parented to its nearest kept
    # ancestor, not cut off as a new line.
    nodes: list[tuple[str, str | None, SourceMessage | None]] = []
    previous: str | None = None
    model = clean_model(item.get("model")) or MODEL
    for position, entry in enumerate(item.get("chat_messages") or []):
        if not isinstance(entry, dict):
            raise BrokenConversation(f"message {position + 1} is not an object")
        own_key = str(entry.get("uuid") or f"{key}#{position}")
        parent = entry.get("parent_message_uuid")
        parent = parent if isinstance(parent, str) and parent != ROOT else None
        if "parent_message_uuid" not in entry:
            parent = previous  # an older export: one line of messages
        previous = own_key
        sender = entry.get("sender")
        if sender not in ("human", "assistant"):
            skipped["messages from neither the person nor Claude"] += 1
            nodes.append((own_key, parent, None))
            continue
        text = _text(entry, skipped)
        attached = _attachments(entry, skipped)
        if not text.strip() and not attached:
            skipped["empty messages"] += 1
            nodes.append((own_key, parent, None))
            continue
        nodes.append((own_key, parent, SourceMessage(
            key=own_key, parent=parent, speaker="user" if sender == "human" else "assistant",
            text=text, created_at=timestamp(entry.get("created_at")),
            model=model if sender == "assistant" else "", files=attached,
        )))  # fmt: skip
    messages = keep_kept(nodes)
    return SourceConversation(
        key=f"{FORMAT}:{key}",
        title=clean_title(item.get("name")),
        messages=messages,
        current=_last_written(nodes),
        created_at=timestamp(item.get("created_at")),
        updated_at=timestamp(item.get("updated_at")),
        skipped=skipped,
    )


def _last_written(nodes: list[tuple[str, str | None, SourceMessage | None]]) -> str | None:
    """The last message the export lists that was kept: the line the person last saw."""
    return next((key for key, _, message in reversed(nodes) if message is not None), None)


def _text(entry: dict[str, Any], skipped: Counter[str]) -> str:
    content = entry.get("content")
    if isinstance(content, list) and content:
        texts = []
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "thinking":
                skipped["Claude's private reasoning"] += 1
            elif part.get("type") in ("tool_use", "tool_result"):
                skipped["tool calls and their results"] += 1
        if texts:
            return clean_text(_unmarked("\n\n".join(texts), skipped), skipped)
    text = entry.get("text")
    return clean_text(_unmarked(text, skipped) if isinstance(text, str) else text, skipped)


# Older Claude exports keep the model's scratchpad and its artifacts as markup in the text.
THINKING = re.compile(r"<antThinking>.*?</antThinking>\s*", re.DOTALL)
ARTIFACT = re.compile(r"<antArtifact\b([^>]*)>(.*?)</antArtifact>", re.DOTALL)
ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
LANGUAGES = {"text/html": "html", "image/svg+xml": "svg", "application/vnd.ant.react": "jsx",
             "application/vnd.ant.mermaid": "mermaid"}  # fmt: skip


def _unmarked(text: str, skipped: Counter[str]) -> str:
    """The text without `<antThinking>` (Claude's private reasoning: left out, counted), each
    `<antArtifact>` as what it holds: code in a fenced block under its title, a document as
    itself."""
    if "<ant" not in text:
        return text
    thoughts = len(THINKING.findall(text))
    if thoughts:
        skipped["Claude's private reasoning"] += thoughts
        text = THINKING.sub("", text)

    def artifact(match: re.Match[str]) -> str:
        attributes = dict(ATTRIBUTE.findall(match[1]))
        title, body = attributes.get("title", "").strip(), match[2].strip("\n")
        kind, language = attributes.get("type", ""), attributes.get("language", "")
        heading = f"**{title}**\n\n" if title else ""
        if kind == "text/markdown":
            return heading + body
        fence = "````" if "```" in body else "```"
        info = language or LANGUAGES.get(kind, "")
        return f"{heading}{fence}{info}\n{body}\n{fence}"

    return ARTIFACT.sub(artifact, text)


def _attachments(entry: dict[str, Any], skipped: Counter[str]) -> list[SourceFile]:
    attached = []
    for attachment in entry.get("attachments") or []:
        if not isinstance(attachment, dict):
            continue
        extracted = attachment.get("extracted_content")
        name = str(attachment.get("file_name") or "attachment.txt")
        if isinstance(extracted, str) and extracted:
            if "." not in name.rsplit("/", 1)[-1]:
                name += ".txt"
            attached.append(SourceFile(name=name, data=clean_text(extracted).encode()))
        else:
            skipped["attachments the export holds no content of"] += 1
    # `files` names every file sent, those whose text is kept above too.
    kept = {a.name for a in attached} | {
        str(a.get("file_name")) for a in entry.get("attachments") or [] if isinstance(a, dict)
    }
    names = [f.get("file_name") for f in entry.get("files") or [] if isinstance(f, dict)]
    missing = [name for name in names if name not in kept]
    if missing:
        skipped["files Claude's export holds only the names of (pictures, documents)"] += len(
            missing
        )
    return attached
