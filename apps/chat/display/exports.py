"""A thread as Markdown, JSON or one self-contained HTML page: the transcript a reader sees,
inherited history included."""

from __future__ import annotations

import base64
import json

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from apps.chat.access import session_roles_by_handle
from apps.chat.display.bubbles import shown_text, whisper_label
from apps.chat.display.citations import cited_markdown
from apps.chat.display.markdown import render_markdown
from apps.chat.models import (
    Attachment,
    Message,
    Thread,
    person_hue,
    person_initials,
    person_name,
    speaker_name,
)
from apps.chat.selectors import message_block_text, speaker_names, transcript_messages

HTML_INLINE_BYTES = 25 * 1024 * 1024


def _filename(thread: Thread, extension: str) -> str:
    base = "".join(c if c.isalnum() or c in "-_" else "-" for c in (thread.label or "thread"))
    return f"{base.strip('-')[:60] or 'thread'}.{extension}"


def _who(message: Message, user, names: dict[str, str]) -> str:
    """A speaker as the exporting person's file names them: "You" for their own messages."""
    if not message.is_user:
        return names.get(message.speaker, message.speaker)
    mine = message.author_id == user.pk or (
        message.author_id is None and message.thread.session.owner_id == user.pk
    )
    return "You" if mine else person_name(message.author)


def _attachments(messages: list[Message]) -> dict[int, list[Attachment]]:
    """The people's messages' attachments, in one query."""
    found: dict[int, list[Attachment]] = {}
    rows = Attachment.objects.filter(message__in=[m for m in messages if m.is_user])
    for attachment in rows.order_by("message_id", "position", "pk"):
        found.setdefault(attachment.message_id or 0, []).append(attachment)
    return found


def _attachment_facts(attachment: Attachment) -> dict:
    return {
        "id": str(attachment.public_id), "name": attachment.name, "kind": attachment.kind,
        "media_type": attachment.media_type, "size": attachment.size,
        "width": attachment.width, "height": attachment.height, "pages": attachment.pages,
        "url": reverse("chat:attachment_file", args=[attachment.public_id]),
    }  # fmt: skip


def export_markdown(thread: Thread, *, user) -> tuple[str, str]:
    """What `user` may see of the thread (never other people's whispers), as Markdown; each
    attachment linked by its name."""
    names = speaker_names(session=thread.session)
    lines = [f"# {thread.label or 'Untitled chat'}", ""]
    lines.append(f"*Exported from Parley on {timezone.now():%Y-%m-%d %H:%M} UTC.*")
    lines.append("")
    messages = list(transcript_messages(thread=thread, user=user))
    attached = _attachments(messages)
    for message in messages:
        header = f"## {_who(message, user, names)}"
        if message.private:
            header += f" (whisper to {whisper_label(message)})"
        if message.status not in ("done",):
            header += f" ({message.get_status_display().lower()})"
        files = attached.get(message.pk, [])
        text = message_block_text(message) or ("" if files else "*(no text)*")
        lines += [header, ""] + ([text, ""] if text else [])
        for attachment in files:
            facts = _attachment_facts(attachment)
            lines.append(
                f"- Attached: [{attachment.name}]({facts['url']}) ({attachment.media_type})"
            )
        if files:
            lines.append("")
        if message.error:
            lines += [f"> Error: {message.error}", ""]
    return "\n".join(lines), _filename(thread, "md")


def export_json(thread: Thread, *, user) -> tuple[str, str]:
    messages = list(transcript_messages(thread=thread, user=user))
    attached = _attachments(messages)
    data = {
        "thread": {
            "id": str(thread.public_id),
            "label": thread.label,
            "session": thread.session.name,
            "parent": str(thread.parent.public_id) if thread.parent is not None else None,
            "exported_at": timezone.now().isoformat(),
        },
        "messages": [
            {
                "id": str(m.public_id),
                "seq": m.seq,
                "thread": str(m.thread.public_id),
                "speaker": m.speaker,
                "author": person_name(m.author) if m.is_user else None,
                "whisper_to": whisper_label(m) or None,
                "status": m.status,
                "content": m.content,
                "error": m.error,
                "provider": m.provider,
                "model": m.model,
                "usage": m.usage,
                "ttft_ms": m.ttft_ms,
                "duration_ms": m.duration_ms,
                "alternatives": m.alternatives,
                "attachments": [_attachment_facts(a) for a in attached.get(m.pk, [])],
                "created_at": m.created_at.isoformat(),
            }
            for m in messages
        ],
    }
    return json.dumps(data, ensure_ascii=False, indent=2), _filename(thread, "json")


def export_html(thread: Thread, *, user) -> tuple[str, str]:
    """One file that opens anywhere, offline: roles' and people's names, icons and colours,
    rendered (and sanitised) Markdown, the styles inline, no script; what `user` may see."""
    messages = list(transcript_messages(thread=thread, user=user))
    roles = session_roles_by_handle(thread.session, {message.speaker for message in messages})
    attachments = _attachments(messages)
    inline = InlineBudget()
    entries = []
    for message in messages:
        role = roles.get(message.speaker)
        entries.append(
            {
                "message": message,
                "name": speaker_name(message, role),
                "icon": person_initials(message.author)
                if message.is_user
                else (role.icon if role else "✦"),
                "colour": role.colour if role else f"hsl({person_hue(message.author)} 45% 45%)",
                "ink": role.ink if role else "",
                "ink_dark": role.ink_dark if role else "",
                "whisper": whisper_label(message),
                "html": render_markdown(
                    shown_text(message)
                    if message.is_user
                    else cited_markdown(shown_text(message), session_id=thread.session_id)[0],
                    breaks=message.is_user,
                ),
                "attachments": [inline.shown(a) for a in attachments.get(message.pk, [])],
            }
        )
    context = {"thread": thread, "entries": entries, "exported_at": timezone.now()}
    return render_to_string("chat/export.html", context), _filename(thread, "html")


class InlineBudget:
    """An HTML export carries its pictures inside it (data URLs: it opens offline) up to
    `HTML_INLINE_BYTES` in all; after that, and for other files, it names them."""

    def __init__(self) -> None:
        self.left = HTML_INLINE_BYTES

    def shown(self, attachment: Attachment) -> dict:
        facts = {**_attachment_facts(attachment), "data_url": ""}
        picture = attachment.file if attachment.is_image else attachment.preview
        media_type = attachment.media_type if attachment.is_image else "image/png"
        if picture and picture.size <= self.left:
            with picture.open("rb") as handle:
                data = handle.read()
            self.left -= len(data)
            facts["data_url"] = f"data:{media_type};base64,{base64.b64encode(data).decode()}"
        return facts
