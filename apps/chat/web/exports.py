"""A thread as Markdown, JSON or one self-contained HTML page: the transcript a reader sees,
inherited history included."""

from __future__ import annotations

import json

from django.template.loader import render_to_string
from django.utils import timezone

from apps.chat.council.requests import message_block_text
from apps.chat.display.bubbles import shown_text
from apps.chat.display.markdown import render_markdown
from apps.chat.models import Thread, speaker_name
from apps.chat.selectors import speaker_names, transcript_messages
from apps.roles.selectors import roles_by_handle


def _filename(thread: Thread, extension: str) -> str:
    base = "".join(c if c.isalnum() or c in "-_" else "-" for c in (thread.label or "thread"))
    return f"{base.strip('-')[:60] or 'thread'}.{extension}"


def export_markdown(thread: Thread) -> tuple[str, str]:
    names = speaker_names(session=thread.session)
    names["user"] = "You"
    lines = [f"# {thread.label or 'Untitled chat'}", ""]
    lines.append(f"*Exported from Parley on {timezone.now():%Y-%m-%d %H:%M} UTC.*")
    lines.append("")
    for message in transcript_messages(thread=thread):
        header = f"## {names.get(message.speaker, message.speaker)}"
        if message.status not in ("done",):
            header += f" ({message.get_status_display().lower()})"
        lines += [header, "", message_block_text(message) or "*(no text)*", ""]
        if message.error:
            lines += [f"> Error: {message.error}", ""]
    return "\n".join(lines), _filename(thread, "md")


def export_json(thread: Thread) -> tuple[str, str]:
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
                "status": m.status,
                "content": m.content,
                "error": m.error,
                "provider": m.provider,
                "model": m.model,
                "usage": m.usage,
                "ttft_ms": m.ttft_ms,
                "duration_ms": m.duration_ms,
                "alternatives": m.alternatives,
                "created_at": m.created_at.isoformat(),
            }
            for m in transcript_messages(thread=thread)
        ],
    }
    return json.dumps(data, ensure_ascii=False, indent=2), _filename(thread, "json")


def export_html(thread: Thread) -> tuple[str, str]:
    """One file that opens anywhere, offline: roles' names, icons and colours, rendered (and
    sanitised) Markdown, the styles inline, no script."""
    messages = list(transcript_messages(thread=thread))
    roles = roles_by_handle({message.speaker for message in messages})
    entries = []
    for message in messages:
        role = roles.get(message.speaker)
        entries.append(
            {
                "message": message,
                "name": speaker_name(message, role),
                "icon": "🙂" if message.is_user else (role.icon if role else "✦"),
                "colour": role.colour if role else "#64748b",
                "html": render_markdown(shown_text(message), breaks=message.is_user),
            }
        )
    context = {"thread": thread, "entries": entries, "exported_at": timezone.now()}
    return render_to_string("chat/export.html", context), _filename(thread, "html")
