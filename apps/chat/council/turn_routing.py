"""Who a message addresses: the route through the session's roles and groups, the notices
for names nobody answers to and muted roles, auto-route's redirection, and the order the
addressed roles answer in."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from apps.chat.council import rounds
from apps.chat.council.auto_route import auto_route
from apps.chat.council.room_rules import Whisper
from apps.chat.models import Session, SessionRole, Thread, TurnMode
from apps.chat.selectors import session_links
from apps.roles.routing import ALL_HANDLE, RosterRole, Route, mentions, route_message
from apps.roles.selectors import group_members


def route_for(*, thread: Thread, session: Session, links: list[SessionRole], text: str) -> Route:
    roster = [
        RosterRole(
            handle=link.role.handle,
            is_default=link.role.is_default,
            answers_last=link.role.answers_last,
            muted=link.muted,
        )
        for link in links
    ]
    # The role groups are read only when a mention could name one (not a role, not @all).
    handles = {role.handle for role in roster} | {ALL_HANDLE}
    named_group = any(handle not in handles for handle in mentions(text))
    return route_message(
        text,
        roles=roster,
        groups=group_members() if named_group else {},
        mode=session.addressing_mode,
        sticky=thread.sticky_handle,
    )


def routing_notices(route: Route, links: list[SessionRole]) -> list[str]:
    notices = []
    if route.unknown:
        names = ", ".join(f"@{h}" for h in route.unknown)
        known = ", ".join(f"@{link.role.handle}" for link in links)
        notices.append(f"Nobody in this chat is called {names}. The roles here: {known}, @all.")
    for handle in route.muted:
        notices.append(
            f"@{handle} is muted and was skipped. Send `/unmute @{handle}` to hear from them."
        )
    return notices


def route_or_refuse(
    *, thread: Thread, session: Session, text: str, links: list[SessionRole] | None = None
) -> Route:
    """The route a message would take now; ValidationError when nobody would answer."""
    links = session_links(session=session) if links is None else links
    route = route_for(thread=thread, session=session, links=links, text=text)
    if not route.targets:
        raise ValidationError(
            " ".join(routing_notices(route, links))
            or "This session has no roles to answer; add one in its settings.",
            code="no_target",
        )
    return route


def turn_route(
    *, thread: Thread, session: Session, links: list[SessionRole], text: str,
    whisper: Whisper | None,
) -> tuple[Route, dict]:  # fmt: skip
    """Who the message addresses (a whisper: the roles it names), and where auto-route sent
    it instead ({} when it did not; never a whisper, which stays within its audience)."""
    if whisper is not None:
        addressed = " ".join(f"@{handle}" for handle in whisper.roles)
        route = route_or_refuse(
            thread=thread, session=session, text=f"{addressed} {text}", links=links
        )
        return route, {}
    route = route_or_refuse(thread=thread, session=session, text=text, links=links)
    routed = auto_route(session=session, links=links, text=text, route=route)
    if not routed:
        return route, {}
    target = next(link.role for link in links if link.role.handle == routed["to"])
    handles = (target.handle,)
    rerouted = Route(
        parallel=() if target.answers_last else handles,
        last=handles if target.answers_last else (),
        sticky=thread.sticky_handle,
    )
    return rerouted, routed


def reply_order(*, session: Session, route: Route) -> tuple[list[str], bool]:
    """The roles that answer, in order, and whether one at a time (the session's round
    order) rather than side by side."""
    targets = list(route.targets)
    sequential = session.turn_mode == TurnMode.SEQUENTIAL and len(targets) > 1
    if sequential:
        order = [role.handle for role in rounds.round_order(session)]
        targets.sort(key=lambda handle: order.index(handle) if handle in order else len(order))
    return targets, sequential
