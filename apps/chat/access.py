"""Who may do what in a session's room. Every read and write of a session's things goes
through one of three needs:

- READ: the owner, members and viewers (see the threads, follow them live, export, search);
- TALK: the owner and members (post, stop, send now, regenerate, branch, make threads);
- OWN: the owner alone (credentials, models, roles, tools, MCP servers, the workspace's quota,
  who is in the room, clearing a thread, deleting the session).

A person who cannot READ a session learns nothing about it (404); one who can read it but
lacks the need gets a 403 that says why.
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Model, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404

from apps.chat.models import Membership, Message, RoomRole, Session, SessionRole, person_name
from apps.roles.models import Role
from apps.roles.routing import mentions
from apps.roles.selectors import roles_by_handle

if TYPE_CHECKING:
    from collections.abc import Callable


M = TypeVar("M", bound=Model)


class Need(enum.StrEnum):
    READ = "read"
    TALK = "talk"
    OWN = "own"


ROOM_ROLES = {
    Need.READ: (RoomRole.MEMBER, RoomRole.VIEWER),
    Need.TALK: (RoomRole.MEMBER,),
    Need.OWN: (),
}

REFUSALS = {
    Need.TALK: "You are a viewer in this room: you can read it live, but only members post, "
    "stop replies or make threads. Ask the owner to make you a member.",
    Need.OWN: "Only the session's owner can change this: its credentials, models, roles, tools, "
    "MCP servers, workspace quota and who is in the room stay theirs.",
}


def session_q(user, need: Need, path: str = "") -> Q:
    """Rows whose session (reached through `path`, e.g. "thread__session__") `user` may reach
    for `need`. The membership is a subquery: a join would repeat the owner's rows once per
    member."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    owned = Q(**{f"{path}owner": user})
    roles = ROOM_ROLES[need]
    if not roles:
        return owned
    joined = Membership.objects.filter(user=user, role__in=roles).values("session_id")
    return owned | Q(**{f"{path}pk__in": joined})


def reach(rows: Callable[..., QuerySet[M]], *, user, need: Need, **lookup) -> M:
    """The one row `rows(user=…, need=…)` has for `lookup`; 404 when `user` cannot even read
    it, 403 saying why when they can read it but `need` more."""
    found = rows(user=user, need=need).filter(**lookup).first()
    if found is not None:
        return found
    if need != Need.READ and rows(user=user, need=Need.READ).filter(**lookup).exists():
        raise PermissionDenied(REFUSALS[need])
    raise Http404


def visible_to(user, path: str = "") -> Q:
    """Messages (reached through `path`) `user` may see: everything but other people's
    whispers. The owner is no exception: a whisper is seen only by its audience."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    heard = Message.audience.through.objects.filter(user=user).values("message_id")
    return Q(**{f"{path}private": False}) | Q(**{f"{path}pk__in": heard})


def room_access(*, user, session: Session) -> str | None:
    """What `user` is in `session`'s room: "owner", "member", "viewer", or None (no access)."""
    if not user.is_authenticated:
        return None
    if session.owner_id == user.pk:
        return "owner"
    return (
        Membership.objects.filter(session=session, user=user).values_list("role", flat=True).first()
    )


def rooms_for_user(*, user) -> QuerySet[Session]:
    """Sessions `user` owns or is in, each with `access` ("owner" or the membership's role)."""
    return (
        Session.objects.filter(session_q(user, Need.READ))
        .annotate(
            access=Coalesce(
                Subquery(
                    Membership.objects.filter(session=OuterRef("pk"), user=user).values("role")[:1]
                ),
                Value("owner"),
            )
        )
        .select_related("owner")
    )


def room_users(*, session_id: int) -> list:
    """Everyone in a session's room as users, in one query."""
    joined = Membership.objects.filter(session_id=session_id).values("user_id")
    owner = Session.objects.filter(pk=session_id).values("owner_id")
    return list(get_user_model().objects.filter(Q(pk__in=owner) | Q(pk__in=joined)))


def message_audience(*, message: Message) -> list[int] | None:
    """The people who may see a message: None for everyone in the room."""
    if not message.private:
        return None
    return list(
        Message.audience.through.objects.filter(message=message).values_list("user_id", flat=True)
    )


def room_people_by_name(session: Session) -> dict[str, Any]:
    """Everyone in the room, by lower-cased username."""
    ids = [
        session.owner_id,
        *Membership.objects.filter(session=session).values_list("user_id", flat=True),
    ]
    people = get_user_model().objects.filter(pk__in=ids)
    return {person.get_username().lower(): person for person in people}


def mentioned_people(*, session: Session, text: str) -> set[int]:
    """The people in the room a message names, by @username or by name (whole words)."""
    people = room_people_by_name(session)
    found = {people[handle].pk for handle in mentions(text) if handle in people}
    for person in people.values():
        name = person_name(person)
        # A whole word, not part of an e-mail address ("charlie@example.com").
        if re.search(rf"(?<![\w@.]){re.escape(name)}(?![\w@])", text, re.I):
            found.add(person.pk)
    return found


def session_roles_by_handle(session: Session, handles: set[str] | None) -> dict[str, Role]:
    """The roles these handles (None: any) name in `session` (its roster, its owner's,
    everyone's): how a speaker or an addressee is shown, never a lookup among all people's
    roles."""
    if handles is not None and not handles:
        return {}
    roster = SessionRole.objects.filter(session_id=session.pk).values("role_id")
    return roles_by_handle(handles, owner_id=session.owner_id, roster=roster)
