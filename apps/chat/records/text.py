"""The rules for text a person types: message bodies and names."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError


def validate_message_text(text: str) -> str:
    """The message without surrounding blanks; empty or over the limit is refused."""
    text = (text or "").strip()
    if not text:
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
    name = " ".join((value or "").split())
    if not name:
        raise ValidationError(f"A {what} cannot be empty.")
    if len(name) > limit:
        raise ValidationError(f"A {what} holds at most {limit} characters, not {len(name)}.")
    return name
