"""What a shared link's page shows: the thread up to the chosen message (or as it goes on),
without whispers — nor anything of the session's persona, memory, credentials or tools, which
a transcript never holds. The roles appear with their names, colours and pictures."""

from __future__ import annotations

import hashlib

from django.urls import reverse
from django.utils import timezone

from apps.chat.access import session_roles_by_handle
from apps.chat.display.bubbles import shown_text
from apps.chat.display.markdown import render_markdown
from apps.chat.livestate import live_texts
from apps.chat.models import (
    IN_FLIGHT,
    Attachment,
    Message,
    MessageKind,
    SharedLink,
    person_hue,
    person_initials,
    speaker_name,
)
from apps.chat.selectors import transcript_messages

MAX_SHOWN = 2_000  # messages on one shared page (the newest, when there are more)


def share_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def shared_link(token: str) -> SharedLink | None:
    """The link a token opens, while it is neither revoked nor expired."""
    link = (
        SharedLink.objects.select_related("thread__session", "up_to")
        .filter(token_hash=share_token_hash(token), revoked_at__isnull=True)
        .first()
    )
    if link is None or (link.expires_at is not None and link.expires_at <= timezone.now()):
        return None
    return link


def shared_messages(link: SharedLink) -> list[Message]:
    """The messages the link shows, in order: never a whisper (nor a reply to one)."""
    messages = [
        m
        for m in transcript_messages(thread=link.thread)
        if not m.private and m.kind == MessageKind.CHAT
    ]
    if link.up_to_id is not None:
        ids = [m.pk for m in messages]
        messages = messages[: ids.index(link.up_to_id) + 1] if link.up_to_id in ids else []
    return messages[-MAX_SHOWN:]


def shared_version(messages: list[Message], live: dict[str, str]) -> str:
    """What a live page shows, in a few characters: the same version, nothing to send again."""
    state = hashlib.sha256()
    for message in messages:
        text = live.get(str(message.public_id), "")
        state.update(f"{message.pk}:{message.status}:{message.updated_at}:{len(text)};".encode())
    return state.hexdigest()[:16]


def shared_state(link: SharedLink) -> tuple[list[Message], dict[str, str], str]:
    """The messages shown, the live text of those still being written, and their version."""
    messages = shared_messages(link)
    live = live_texts([str(m.public_id) for m in messages if m.status in IN_FLIGHT])
    return messages, live, shared_version(messages, live)


def shared_entries(
    link: SharedLink, token: str, state: tuple[list[Message], dict[str, str], str] | None = None
) -> list[dict]:
    messages, live, _ = state or shared_state(link)
    roles = session_roles_by_handle(
        link.thread.session, {m.speaker for m in messages if not m.is_user}
    )
    attached: dict[int, list[Attachment]] = {}
    for attachment in Attachment.objects.filter(message__in=messages).order_by("position", "pk"):
        attached.setdefault(attachment.message_id or 0, []).append(attachment)
    entries = []
    for message in messages:
        role = None if message.is_user else roles.get(message.speaker)
        text = live.get(str(message.public_id), "") if message.in_flight else shown_text(message)
        icon = person_initials(message.author) if message.is_user else (role.icon if role else "✦")
        entries.append({
            "message": message,
            "name": speaker_name(message, role),
            "icon": icon,
            "avatar": reverse("chat:shared_avatar", args=[token, role.handle])
            if role is not None and role.avatar else "",
            "colour": role.colour if role else f"hsl({person_hue(message.author)} 45% 45%)",
            "ink": role.ink if role else "", "ink_dark": role.ink_dark if role else "",
            "html": render_markdown(text, breaks=message.is_user),
            "writing": message.in_flight,
            "attachments": [
                {"name": a.name, "is_image": a.is_image,
                 "url": reverse("chat:shared_attachment", args=[token, a.public_id])}
                for a in attached.get(message.pk, [])
            ],
        })  # fmt: skip
    return entries


def shared_attachment(link: SharedLink, public_id) -> Attachment | None:
    """An attachment of a message the link shows (nothing else is reachable through it)."""
    attachment = Attachment.objects.filter(public_id=public_id, message__isnull=False).first()
    if attachment is None:
        return None
    shown = {m.pk for m in shared_messages(link)}
    return attachment if attachment.message_id in shown else None


def shared_role_speaks(link: SharedLink, handle: str):
    """The role, when it speaks on the link's page (its picture may then be fetched)."""
    if not any(m.speaker == handle for m in shared_messages(link)):
        return None
    return session_roles_by_handle(link.thread.session, {handle}).get(handle)


def links_for_user(user) -> list[SharedLink]:
    return list(
        SharedLink.objects.filter(created_by=user)
        .select_related("thread__session", "up_to")
        .order_by("-created_at")
    )
