"""Gathers what a reply's request needs from the database and hands it to `prompting`."""

from __future__ import annotations

from apps.chat.models import Message
from apps.chat.prompting import RosterEntry, TranscriptEntry, build_role_request
from apps.chat.selectors import transcript_messages
from apps.providers.calls import default_max_tokens
from apps.providers.types import ChatRequest
from apps.roles.models import Role


def _roster_entry(role: Role) -> RosterEntry:
    return RosterEntry(
        handle=role.handle,
        display_name=role.display_name,
        description=role.description,
        persona=role.persona,
    )


def request_for_reply(*, message: Message) -> ChatRequest:
    """The provider request for a queued reply: everything said before it, then its cue."""
    thread = message.thread
    session = thread.session
    roles = [
        link.role
        for link in session.session_roles.select_related("role").order_by(
            "role__sort_order", "role__handle"
        )
    ]
    by_handle = {role.handle: role for role in roles}
    speaker = by_handle.get(message.speaker) or Role.objects.get(handle=message.speaker)
    history = transcript_messages(thread=thread, before_seq=message.seq)
    transcript = [
        TranscriptEntry(
            speaker_name=(
                (entry.author.get_username() if entry.author else "User")
                if entry.is_user
                else getattr(by_handle.get(entry.speaker), "display_name", entry.speaker)
            ),
            text=entry.text,
            is_user=entry.is_user,
        )
        for entry in history
        if entry.text
    ]
    return build_role_request(
        model=message.model,
        roster=[_roster_entry(role) for role in roles],
        speaker=_roster_entry(speaker),
        transcript=transcript,
        session_persona=session.persona,
        memory=session.memory,
        max_tokens=default_max_tokens(message.model),
    )
