"""What the display shows of a shared room besides bubbles: the banner of a tab whose
person left, the typing signal, and the "while you were away" card."""

from __future__ import annotations

import re

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from apps.chat.display.markdown import render_markdown
from apps.chat.models import Message


def room_banner(*, left: bool) -> str:
    """What a tab shows when its person is taken out of the room or given another role."""
    text = (
        "You are no longer in this room: the owner took you out, or you left."
        if left
        else "Your role in this room changed; reloading…"
    )
    return format_html(
        '<div id="room-banner" class="room-banner" role="alert" hx-swap-oob="true">{} '
        '<a href="{}">Your sessions</a></div>',
        text,
        reverse("chat:session_list"),
    )


def typing_fragment(*, user_id: int, name: str) -> str:
    """One "is typing" signal for the thread's tabs; the page shows it for a few seconds."""
    return format_html(
        '<div id="typing-events" hx-swap-oob="beforeend"><span data-user="{}" data-name="{}">'
        "</span></div>",
        user_id,
        name,
    )


DIGEST_CITATION = re.compile(r"\[#(\d+)\](?!\()")


def digest_context(digest) -> dict:
    """A digest's card: its text with each [#N] a link to that message of the thread."""
    if digest is None or digest.status != "done":
        return {"digest": digest, "digest_html": ""}
    ids = dict(Message.objects.filter(thread_id=digest.thread_id).values_list("seq", "public_id"))
    base = reverse("chat:thread_detail", kwargs={"thread": digest.thread.public_id})

    def link(match: re.Match) -> str:
        public_id = ids.get(int(match[1]))
        return f"[#{match[1]}]({base}?at={public_id}#msg-{public_id})" if public_id else match[0]

    return {
        "digest": digest,
        "digest_html": render_markdown(DIGEST_CITATION.sub(link, digest.text)),
    }


def render_digest(digest) -> SafeString:
    context = {**digest_context(digest), "oob": True}
    return mark_safe(render_to_string("chat/_digest.html", context))  # noqa: S308
