"""The rules for text a person types (message bodies and names) and the one storage boundary
every text passes before it is saved."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

# The storage boundary lives below the apps that share it; the chat app reaches it from here.
from apps.attachments.text import REPLACEMENT as REPLACEMENT
from apps.attachments.text import UNSTORABLE as UNSTORABLE
from apps.attachments.text import storable as storable


def storable_parts(value: Any) -> Any:
    """`storable` through JSON-like data: message parts, tool arguments and results."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return [storable_parts(item) for item in value]
    if isinstance(value, dict):
        return {storable(str(key)): storable_parts(item) for key, item in value.items()}
    return value


def validate_message_text(text: str) -> str:
    """The message without surrounding blanks; empty or over the limit is refused."""
    text = storable(text or "").strip()
    if not text.replace(REPLACEMENT, "").strip():  # nothing, or only bytes nobody can read
        raise ValidationError("Write something before sending.", code="empty")
    limit = settings.PARLEY_MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise ValidationError(
            f"That message is {len(text):,} characters; the limit is {limit:,}. "
            "Shorten it or split it into parts.",
            code="too_long",
        )
    return text


def clean_name(value: str, *, what: str, limit: int = 120) -> str:
    """A name on one line with single spaces; empty or too long is refused."""
    name = " ".join(storable(value or "").split())
    if not name:
        raise ValidationError(f"A {what} cannot be empty.")
    if len(name) > limit:
        raise ValidationError(f"A {what} holds at most {limit} characters, not {len(name)}.")
    return name
