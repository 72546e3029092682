"""What each provider accepts of images and documents, and how it refuses the rest, as the
real APIs do (TECH_NOTES §11.2 to 11.4, §11.9): the emulator answers these refusals before any
script runs, so an adapter that sends a wrong part fails its test as it would in production.
Media are counted as the providers count them (a fixed share per image or page), not as the
length of their base64."""

from __future__ import annotations

import base64
import binascii
from typing import Any

ANTHROPIC_IMAGES = ("image/jpeg", "image/png", "image/gif", "image/webp")
OPENAI_IMAGES = ("png", "jpeg", "webp", "gif")
GEMINI_TYPES = ("image/png", "image/jpeg", "image/webp", "image/heic", "image/heif",
                "application/pdf", "text/plain")  # fmt: skip
ANTHROPIC_IMAGE_BASE64_CAP = 5_242_880
IMAGE_TOKENS = 1_568  # a standard-tier Anthropic image at its largest; near the others'
PDF_TOKENS = 2_000
MAGIC = {
    b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF8": "image/gif",
    b"RIFF": "image/webp", b"%PDF-": "application/pdf",
}  # fmt: skip
# Models the emulator serves as text-only (an OpenAI-compatible server's answer to an image).
TEXT_ONLY_MODELS = ("llama3.1", "gpt-3.5", "text-only")

Refusal = tuple[int, str, str]  # HTTP status, error type, message


def _decoded(data: str) -> bytes | None:
    try:
        return base64.b64decode(data.replace("-", "+").replace("_", "/") + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        return None


def _sniffed(data: bytes) -> str:
    return next((kind for magic, kind in MAGIC.items() if data.startswith(magic)), "")


def anthropic_refusal(body: dict) -> Refusal | None:
    for i, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            kind = block.get("type")
            if kind not in ("image", "document"):
                continue
            path = f"messages.{i}.content.{j}.{kind}.source"
            if message.get("role") != "user":
                return 400, "invalid_request_error", f"{path}: media go in user turns only"
            source = block.get("source", {})
            if source.get("type") != "base64":
                return 400, "invalid_request_error", f"{path}: Parley never sends a URL"
            media_type, data = source.get("media_type"), source.get("data", "")
            if kind == "image" and media_type not in ANTHROPIC_IMAGES:
                return (
                    400,
                    "invalid_request_error",
                    (
                        f"{path}.base64.media_type: Input should be 'image/jpeg', 'image/png', "
                        "'image/gif' or 'image/webp'"
                    ),
                )
            raw = _decoded(data)
            if raw is None:
                return 400, "invalid_request_error", f"{path}.base64.data: invalid base64 data"
            if kind == "image" and len(data) > ANTHROPIC_IMAGE_BASE64_CAP:
                return (
                    400,
                    "invalid_request_error",
                    (
                        f"{path}.base64.data: image exceeds 5 MB maximum: {len(data)} bytes > "
                        f"{ANTHROPIC_IMAGE_BASE64_CAP} bytes"
                    ),
                )
            if _sniffed(raw) != media_type:
                return (
                    400,
                    "invalid_request_error",
                    (
                        f"{path}.base64.data: Image does not match the provided media type "
                        f"{media_type}"
                        if kind == "image"
                        else f"{path}.base64.data: The PDF specified was not valid."
                    ),
                )
    return None


# OpenAI's reasoning models refuse `max_tokens` (they take `max_completion_tokens`): 400
# `unsupported_parameter`, as api.openai.com answers.
REASONING_MODELS = ("o1", "o3", "o4", "gpt-5")


def field_refusal(body: dict, refused: list[tuple[str, str]]) -> Refusal | None:
    """A request field the server refuses for this model: OpenAI's own rule, and those a test
    adds (`Emulator.refused_fields`: (model prefix, field) pairs) to play a server that
    refuses them."""
    model = str(body.get("model", ""))
    if model.startswith(REASONING_MODELS) and "max_tokens" in body:
        return (
            400,
            "invalid_request_error",
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
        )
    for prefix, name in refused:
        if model.startswith(prefix) and name in body:
            return 400, "invalid_request_error", f"Unrecognized request argument supplied: {name}"
    return None


def openai_refusal(body: dict) -> Refusal | None:
    text_only = any(name in str(body.get("model", "")) for name in TEXT_ONLY_MODELS)
    for i, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        for j, part in enumerate(content if isinstance(content, list) else []):
            kind = part.get("type")
            if kind not in ("image_url", "file"):
                continue
            if message.get("role") != "user":
                return (
                    400,
                    "invalid_request_error",
                    (f"Invalid 'messages[{i}]': {kind} parts are only allowed in user messages."),
                )
            if text_only and kind == "image_url":
                return (
                    400,
                    "invalid_request_error",
                    ("Invalid content type. image_url is only supported by certain models."),
                )
            url = (part.get("image_url") or {}).get("url", "") if kind == "image_url" else (
                (part.get("file") or {}).get("file_data", ""))  # fmt: skip
            head, _, data = url.partition(";base64,")
            wanted = ("data:application/pdf",) if kind == "file" else tuple(
                f"data:image/{name}" for name in OPENAI_IMAGES)  # fmt: skip
            raw = _decoded(data) if head in wanted else None
            if raw is None or _sniffed(raw) != head.removeprefix("data:"):
                return (
                    400,
                    "invalid_request_error",
                    (
                        f"Invalid 'messages[{i}].content[{j}]': expected a base64 data URL of "
                        f"{'a PDF' if kind == 'file' else 'a PNG, JPEG, WEBP or GIF image'}."
                    ),
                )
            if kind == "file" and not (part.get("file") or {}).get("filename"):
                return 400, "invalid_request_error", "Missing required parameter: 'filename'."
    return None


def gemini_refusal(body: dict) -> Refusal | None:
    for content in body.get("contents", []):
        for part in content.get("parts", []):
            blob = part.get("inline_data") or part.get("inlineData")
            if not blob:
                continue
            mime = blob.get("mime_type") or blob.get("mimeType") or ""
            if mime not in GEMINI_TYPES:
                return 400, "INVALID_ARGUMENT", f"Unsupported MIME type: {mime}"
            if _decoded(blob.get("data", "")) is None:
                return 400, "INVALID_ARGUMENT", "Request contains an invalid argument."
    return None


REFUSALS = {"anthropic": anthropic_refusal, "openai": openai_refusal, "gemini": gemini_refusal}


def without_media(value: Any) -> tuple[Any, int]:
    """`value` with each image's or document's bytes taken out, and the tokens they count
    for (so a 1 MB image counts as an image, not as a million characters)."""
    if isinstance(value, list):
        pieces = [without_media(item) for item in value]
        return [piece for piece, _ in pieces], sum(tokens for _, tokens in pieces)
    if not isinstance(value, dict):
        if isinstance(value, str) and value.startswith("data:") and ";base64," in value:
            pdf = value.startswith("data:application/pdf")
            return "<media>", PDF_TOKENS if pdf else IMAGE_TOKENS
        return value, 0
    kind = value.get("mime_type") or value.get("mimeType") or value.get("media_type") or ""
    if "data" in value and isinstance(value["data"], str) and kind:
        rest = {key: item for key, item in value.items() if key != "data"}
        return rest, PDF_TOKENS if kind == "application/pdf" else IMAGE_TOKENS
    out, tokens = {}, 0
    for key, item in value.items():
        out[key], counted = without_media(item)
        tokens += counted
    return out, tokens
