"""The one rendering path for a message bubble: HTTP responses and websocket pushes alike."""

from __future__ import annotations

from collections.abc import Iterable

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from apps.chat.models import Message, MessageKind, MessageStatus
from apps.chat.rendering import render_markdown
from apps.roles.models import Role
from apps.roles.selectors import roles_by_handle


def bubble_context(message: Message, *, role: Role | None, live_text: str | None = None) -> dict:
    text = message.text if live_text is None else live_text
    streaming = message.status in (MessageStatus.QUEUED, MessageStatus.STREAMING)
    return {
        "message": message,
        "role": role,
        "speaker_name": "You"
        if message.is_user
        else (role.display_name if role else message.speaker),
        "is_notice": message.kind == MessageKind.NOTICE,
        "streaming": streaming,
        "text": text,
        # Markdown is rendered once a reply settles; while it streams the raw text grows.
        "body_html": None if streaming else render_markdown(text),
    }


def render_bubbles(
    messages: Iterable[Message],
    *,
    live_texts: dict[str, str] | None = None,
    oob: bool = False,
) -> SafeString:
    """Render bubbles in order; `oob` marks each for an out-of-band replace by id."""
    messages = list(messages)
    roles = roles_by_handle({message.speaker for message in messages})
    live_texts = live_texts or {}
    html = "".join(
        render_to_string(
            "chat/_message.html",
            {
                **bubble_context(
                    message,
                    role=roles.get(message.speaker),
                    live_text=live_texts.get(str(message.public_id)),
                ),
                "oob": oob,
            },
        )
        for message in messages
    )
    return mark_safe(html)  # noqa: S308  (concatenated template output, escaped by the engine)
