"""Canonical transcript ⇄ each provider's message format, tool calls and results included.

Pure functions over plain data, so a thread can move between providers mid-way: whatever one
provider produced is stored canonically and re-expressed for the next.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from typing import Any

from apps.providers.types import ChatMessage, ChatRequest, Part

EPHEMERAL = {"type": "ephemeral"}
MEDIA = ("image", "document")  # parts whose bytes are in the request's blobs


def _bytes(blobs: Mapping[str, bytes], part: Part) -> bytes:
    try:
        return blobs[part["attachment"]]
    except KeyError:
        missing = part["attachment"]
        raise ValueError(f"The request holds no bytes for attachment {missing}") from None


def _base64(blobs: Mapping[str, bytes], part: Part) -> str:
    return base64.b64encode(_bytes(blobs, part)).decode()


def _tool_call_id(part: Part) -> str:
    return part.get("id") or f"call_{uuid.uuid4().hex[:12]}"


# --- Anthropic ------------------------------------------------------------------------------


def to_anthropic_blocks(part: Part, blobs: Mapping[str, bytes]) -> dict[str, Any] | None:
    kind = part["type"]
    if kind == "text":
        return {"type": "text", "text": part["text"]} if part["text"] else None
    if kind == "image":
        source = {"type": "base64", "media_type": part["media_type"], "data": _base64(blobs, part)}
        return {"type": "image", "source": source}
    if kind == "document":
        source = {"type": "base64", "media_type": part["media_type"], "data": _base64(blobs, part)}
        return {"type": "document", "source": source, "title": part.get("name") or "document"}
    if kind == "tool_call":
        return {
            "type": "tool_use",
            "id": _tool_call_id(part),
            "name": part["name"],
            "input": part.get("arguments") or {},
        }
    if kind == "tool_result":
        return {
            "type": "tool_result",
            "tool_use_id": part["tool_call_id"],
            "content": part.get("content", ""),
            "is_error": bool(part.get("is_error")),
        }
    raise ValueError(f"Unknown part type {kind!r}")


def _breakpoint(ttl: str) -> dict[str, str]:
    # The 5-minute TTL is the default: leaving it out keeps those requests byte-identical.
    return EPHEMERAL if ttl == "5m" else {**EPHEMERAL, "ttl": ttl}


def to_anthropic(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for `messages.create/stream` with cache breakpoints in place."""
    system = []
    for block in request.system:
        entry: dict[str, Any] = {"type": "text", "text": block.text}
        if block.cache:
            entry["cache_control"] = _breakpoint(request.system_cache_ttl)
        system.append(entry)
    messages = []
    for message in request.messages:
        blocks = [b for b in (to_anthropic_blocks(p, request.blobs) for p in message.parts) if b]
        if not blocks:
            continue
        if message.cache:
            blocks[-1] = {**blocks[-1], "cache_control": _breakpoint(request.history_cache_ttl)}
        messages.append({"role": message.role, "content": blocks})
    kwargs: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    }
    if system:
        kwargs["system"] = system
    if request.tools:
        kwargs["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    if request.stop_sequences:
        kwargs["stop_sequences"] = list(request.stop_sequences)
    return kwargs


def from_anthropic(messages: list[dict[str, Any]]) -> list[ChatMessage]:
    result: list[ChatMessage] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts: list[Part] = []
        for block in content:
            if block["type"] == "text":
                parts.append({"type": "text", "text": block["text"]})
            elif block["type"] == "tool_use":
                parts.append(
                    {"type": "tool_call", "id": block["id"], "name": block["name"],
                     "arguments": block.get("input") or {}}
                )  # fmt: skip
            elif block["type"] == "tool_result":
                parts.append(
                    {"type": "tool_result", "tool_call_id": block["tool_use_id"],
                     "name": _name_for(result, block["tool_use_id"]),
                     "content": _flatten(block.get("content", "")),
                     "is_error": bool(block.get("is_error"))}
                )  # fmt: skip
        result.append(ChatMessage(role=message["role"], parts=tuple(parts)))
    return result


def _flatten(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(item.get("text", "") for item in content)


def _name_for(history: list[ChatMessage], call_id: str) -> str:
    for message in reversed(history):
        for part in message.parts:
            if part["type"] == "tool_call" and part["id"] == call_id:
                return part["name"]
    return ""


# --- OpenAI chat completions ----------------------------------------------------------------


def to_openai(request: ChatRequest) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(block.text for block in request.system)
    if system:
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        texts = "".join(p["text"] for p in message.parts if p["type"] == "text")
        calls = [p for p in message.parts if p["type"] == "tool_call"]
        results = [p for p in message.parts if p["type"] == "tool_result"]
        for result in results:
            messages.append(
                {"role": "tool", "tool_call_id": result["tool_call_id"],
                 "content": result.get("content", "")}
            )  # fmt: skip
        if message.role == "assistant" and (texts or calls):
            entry: dict[str, Any] = {"role": "assistant", "content": texts or None}
            if calls:
                entry["tool_calls"] = [
                    {"id": _tool_call_id(call), "type": "function",
                     "function": {"name": call["name"],
                                  "arguments": json.dumps(call.get("arguments") or {})}}
                    for call in calls
                ]  # fmt: skip
            messages.append(entry)
        elif message.role == "user" and any(p["type"] in MEDIA for p in message.parts):
            messages.append({"role": "user", "content": _openai_parts(message, request.blobs)})
        elif message.role == "user" and texts:
            messages.append({"role": "user", "content": texts})
    kwargs: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.tools:
        kwargs["tools"] = [
            {"type": "function",
             "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]  # fmt: skip
    if request.stop_sequences:
        kwargs["stop"] = list(request.stop_sequences)
    return kwargs


def _openai_parts(message: ChatMessage, blobs: Mapping[str, bytes]) -> list[dict[str, Any]]:
    """A user message with images or PDFs: its parts in their order, the media as data URLs
    (PDFs as file parts, which Chat Completions takes with a filename)."""
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if part["type"] == "text" and part["text"]:
            parts.append({"type": "text", "text": part["text"]})
        elif part["type"] in MEDIA:
            url = f"data:{part['media_type']};base64,{_base64(blobs, part)}"
            if part["type"] == "image":
                parts.append({"type": "image_url", "image_url": {"url": url}})
            else:
                name = part.get("name") or "document.pdf"
                parts.append({"type": "file", "file": {"filename": name, "file_data": url}})
    return parts


def from_openai(messages: list[dict[str, Any]]) -> tuple[str, list[ChatMessage]]:
    """Return the system text and the canonical messages."""
    system, result = "", []
    names: dict[str, str] = {}
    for message in messages:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "user":
            result.append(ChatMessage("user", ({"type": "text", "text": message["content"]},)))
        elif role == "assistant":
            parts: list[Part] = []
            if message.get("content"):
                parts.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
                parts.append(
                    {"type": "tool_call", "id": call["id"], "name": call["function"]["name"],
                     "arguments": json.loads(call["function"]["arguments"] or "{}")}
                )  # fmt: skip
            result.append(ChatMessage("assistant", tuple(parts)))
        elif role == "tool":
            part = {"type": "tool_result", "tool_call_id": message["tool_call_id"],
                    "name": names.get(message["tool_call_id"], ""),
                    "content": message["content"], "is_error": False}  # fmt: skip
            if (
                result
                and result[-1].role == "user"
                and all(p["type"] == "tool_result" for p in result[-1].parts)
            ):
                result[-1] = ChatMessage("user", (*result[-1].parts, part))
            else:
                result.append(ChatMessage("user", (part,)))
    return system, result


# --- Gemini ---------------------------------------------------------------------------------


def to_gemini_contents(
    messages: tuple[ChatMessage, ...] | list[ChatMessage], blobs: Mapping[str, bytes] | None = None
) -> list[Any]:
    contents = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        for part in message.parts:
            if part["type"] == "text" and part["text"]:
                parts.append({"text": part["text"]})
            elif part["type"] in MEDIA:
                media = {"mime_type": part["media_type"], "data": _bytes(blobs or {}, part)}
                parts.append({"inline_data": media})
            elif part["type"] == "tool_call":
                parts.append(
                    {"function_call": {"id": _tool_call_id(part), "name": part["name"],
                                       "args": part.get("arguments") or {}}}
                )  # fmt: skip
            elif part["type"] == "tool_result":
                key = "error" if part.get("is_error") else "output"
                parts.append(
                    {"function_response": {"id": part["tool_call_id"], "name": part.get("name", ""),
                                           "response": {key: part.get("content", "")}}}
                )  # fmt: skip
        if parts:
            contents.append(
                {"role": "model" if message.role == "assistant" else "user", "parts": parts}
            )
    return contents


def from_gemini_contents(contents: list[dict]) -> list[ChatMessage]:
    result = []
    for content in contents:
        parts: list[Part] = []
        for part in content["parts"]:
            if part.get("text"):
                parts.append({"type": "text", "text": part["text"]})
            elif part.get("function_call"):
                call = part["function_call"]
                parts.append({"type": "tool_call", "id": call.get("id") or "", "name": call["name"],
                              "arguments": dict(call.get("args") or {})})  # fmt: skip
            elif part.get("function_response"):
                response = part["function_response"]
                body = response.get("response") or {}
                parts.append(
                    {"type": "tool_result", "tool_call_id": response.get("id") or "",
                     "name": response.get("name", ""),
                     "content": str(body.get("output", body.get("error", ""))),
                     "is_error": "error" in body}
                )  # fmt: skip
        result.append(
            ChatMessage("assistant" if content["role"] == "model" else "user", tuple(parts))
        )
    return result
