"""What a room adds to posting: whispers (messages for part of the room) and mentions of
people. Each member's daily token budget is kept in `records.budgets`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from apps.chat.access import room_people_by_name
from apps.chat.models import Session
from apps.roles.routing import leading_mentions

WHISPER = re.compile(r"^/(?:whisper|w)(?:\s+|$)", re.I)
LEADING_NAMES = re.compile(r"^\s*(?:@[\w-]+[\s,:;]*)*")


@dataclass(frozen=True)
class Whisper:
    """A message for part of the room: these people (its author always among them) and these
    roles; `text` is what is said, without the command and the names."""

    text: str
    people: list = field(default_factory=list)
    roles: list[str] = field(default_factory=list)

    @property
    def people_ids(self) -> list[int]:
        return [person.pk for person in self.people]


def is_whisper(text: str) -> bool:
    return bool(WHISPER.match(text))


def whisper_parse(*, session: Session, author, text: str) -> Whisper:
    """`/whisper @director @sam text`: the names it starts with (roles of the session, people
    in the room) and the text; a clear error for a name that is neither, or nothing to say."""
    rest = WHISPER.sub("", text, count=1)
    names = leading_mentions(rest)
    body = LEADING_NAMES.sub("", rest, count=1).strip()
    if not names:
        raise ValidationError(
            "Say who the whisper is for: /whisper @role or @username, then the message."
        )
    if not body:
        raise ValidationError("A whisper needs something to say after the names.")
    handles = set(session.session_roles.values_list("role__handle", flat=True))
    people = room_people_by_name(session)
    unknown = [name for name in names if name not in handles and name not in people]
    if unknown:
        raise ValidationError(
            f"Nobody in this room is called {', '.join('@' + n for n in unknown)}: a whisper "
            "goes to the session's roles and the people in the room, by @handle or @username."
        )
    roles = [name for name in names if name in handles]
    audience = [author, *(people[n] for n in names if n in people and people[n].pk != author.pk)]
    if len(audience) == 1 and not roles:
        raise ValidationError("Whisper to someone besides yourself: a role or a person here.")
    return Whisper(text=body, people=audience, roles=roles)
