"""ChatGPT's data export: `conversations.json` (alone or in the export's `.zip`), a list of
conversations whose `mapping` is a tree of nodes (an edited question or a regenerated answer is
a sibling), `current_node` the leaf last shown. Images the person sent are in the zip, named
after their `file-service://` pointer."""

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

FORMAT = "chatgpt"
LABEL = "ChatGPT"
# How a person gets the export (the Import page lists it).
WHERE = (
    "Settings → Data controls → Export data. The e-mail's link downloads a .zip: send "
    "it whole (its images come along), or its conversations.json."
)

# What a node's content type holds, when it is not the person's or the model's words.
DROPPED_TYPES = {
    "code": "the model's tool calls (code it ran, searches it made)",
    "execution_output": "tool output (code runs, searches, browsing)",
    "tether_browsing_display": "tool output (code runs, searches, browsing)",
    "tether_quote": "tool output (code runs, searches, browsing)",
    "system_error": "tool output (code runs, searches, browsing)",
    "thoughts": "the model's private reasoning",
    "reasoning_recap": "the model's private reasoning",
    "user_editable_context": "custom instructions (set them as the session's persona)",
}


def looks_like(item: dict[str, Any]) -> bool:
    return isinstance(item.get("mapping"), dict)


def conversation(
    item: dict[str, Any], files: Callable[[str], SourceFile | None]
) -> SourceConversation:
    mapping = item.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        raise BrokenConversation("it has no messages ('mapping' is missing or empty)")
    skipped: Counter[str] = Counter()
    nodes = []
    for key, node in mapping.items():
        if not isinstance(node, dict):
            raise BrokenConversation(f"node {str(key)[:40]!r} is not an object")
        parent = node.get("parent")
        nodes.append((str(key), str(parent) if parent else None, _message(node, files, skipped)))
    messages = keep_kept(nodes)
    default_model = clean_model(item.get("default_model_slug"))
    for message in messages:
        if message.speaker == "assistant" and not message.model:
            message.model = default_model or "ChatGPT"
    key = item.get("conversation_id") or item.get("id")
    if not isinstance(key, str) or not key:
        raise BrokenConversation("it has no id")
    current = item.get("current_node")
    return SourceConversation(
        key=f"{FORMAT}:{key}",
        title=clean_title(item.get("title")),
        messages=messages,
        current=current if isinstance(current, str) else None,
        created_at=timestamp(item.get("create_time")),
        updated_at=timestamp(item.get("update_time")),
        skipped=skipped,
    )


def _message(
    node: dict[str, Any], files: Callable[[str], SourceFile | None], skipped: Counter[str]
) -> SourceMessage | None:
    message = node.get("message")
    if not isinstance(message, dict):
        return None  # the tree's empty root
    role = (message.get("author") or {}).get("role")
    content = message.get("content") or {}
    content_type = content.get("content_type", "text")
    metadata = message.get("metadata") or {}
    if role not in ("user", "assistant"):
        if role == "tool":
            skipped["tool output (code runs, searches, browsing)"] += 1
        elif _text_of(content, files, Counter())[0].strip() and not metadata.get(
            "is_visually_hidden_from_conversation"
        ):
            skipped["system messages"] += 1
        return None
    if content_type in DROPPED_TYPES:
        skipped[DROPPED_TYPES[content_type]] += 1
        return None
    if metadata.get("is_visually_hidden_from_conversation"):
        return None
    text, attached = _text_of(content, files, skipped)
    if not text.strip() and not attached:
        return None  # an empty placeholder ChatGPT keeps between tool steps
    if role == "assistant":
        text = _with_citations(text, metadata, skipped)
    finish = metadata.get("finish_details")
    interrupted = isinstance(finish, dict) and finish.get("type") == "interrupted"
    return SourceMessage(
        key="",  # the node's, and its parent, are set by keep_kept
        parent=None,
        speaker=role,
        text=text,
        created_at=timestamp(message.get("create_time")),
        model=clean_model(metadata.get("model_slug")) if role == "assistant" else "",
        files=attached,
        interrupted=interrupted,
    )


# A citation ChatGPT leaves in the text, 【3:0†source】 or a private-use form, where the
# source stands in the message's metadata.
MARKER = re.compile(r"【[^】]{0,80}】|\ue200cite\ue202[^\ue201]{0,200}\ue201")


def _with_citations(text: str, metadata: dict[str, Any], skipped: Counter[str]) -> str:
    """Each citation marker as a link to its source (`metadata.citations` by position,
    `metadata.content_references` by the marker's text); a marker whose source the export
    does not hold is taken out, and counted."""
    spans = []
    for citation in metadata.get("citations") or []:
        if not isinstance(citation, dict):
            continue
        start, end = citation.get("start_ix"), citation.get("end_ix")
        given = citation.get("metadata")
        source: dict[str, Any] = given if isinstance(given, dict) else {}
        if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text):
            spans.append((start, end, _link(source.get("title"), source.get("url"))))
    for start, end, link in sorted(spans, reverse=True):
        text = text[:start] + link + text[end:]
    for reference in metadata.get("content_references") or []:
        if not isinstance(reference, dict) or not isinstance(reference.get("matched_text"), str):
            continue
        items = [i for i in reference.get("items") or [] if isinstance(i, dict)]
        links = "".join(_link(i.get("title"), i.get("url")) for i in items)
        if reference["matched_text"] and links:
            text = text.replace(reference["matched_text"], links)
    left = len(MARKER.findall(text))
    if left:
        skipped["citation markers whose source the export does not hold"] += left
        text = MARKER.sub("", text)
    return text


def _link(title: Any, url: Any) -> str:
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return ""
    label = " ".join(str(title or "").split())[:80].replace("[", "(").replace("]", ")")
    return f" [{label or url}]({url.replace(')', '%29').replace(' ', '%20')})"


def _text_of(
    content: dict[str, Any], files: Callable[[str], SourceFile | None], skipped: Counter[str]
) -> tuple[str, list[SourceFile]]:
    texts: list[str] = []
    attached: list[SourceFile] = []
    if isinstance(content.get("text"), str):
        texts.append(content["text"])
    for part in content.get("parts") or []:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("content_type") == "image_asset_pointer":
            found = files(str(part.get("asset_pointer", "")))
            if found is None:
                skipped["images not in the file (import the export's .zip to keep them)"] += 1
            else:
                attached.append(found)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            skipped["parts of a kind Parley does not keep (audio, video)"] += 1
    return clean_text("\n\n".join(t for t in texts if t), skipped), attached
