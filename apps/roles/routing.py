"""Who answers a message: @-mentions, groups, sticky/broadcast modes, mutes, answers-last.

A pure function over plain data. It decides only *who* is called and in which order; every
addressed role receives the whole message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ALL_HANDLE = "all"
# `@` after a word character is an e-mail address, not a mention.
MENTION = re.compile(r"(?<![\w.@/+-])@([A-Za-z][A-Za-z0-9_-]*)")
CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)


@dataclass(frozen=True)
class RosterRole:
    handle: str
    is_default: bool = False
    answers_last: bool = False
    muted: bool = False


@dataclass(frozen=True)
class Route:
    parallel: tuple[str, ...]  # answer at the same time
    last: tuple[str, ...]  # answer after all of `parallel`, seeing their answers
    unknown: tuple[str, ...] = ()  # mentioned handles that name nobody (tell the person)
    muted: tuple[str, ...] = ()  # addressed but muted (tell the person)
    sticky: str = ""  # the session's sticky role after this message

    @property
    def targets(self) -> tuple[str, ...]:
        return self.parallel + self.last


def mentions(text: str) -> list[str]:
    """Handles mentioned outside code, lower-cased, in order of first appearance."""
    seen: list[str] = []
    for match in MENTION.finditer(CODE.sub(" ", text)):
        handle = match.group(1).lower().rstrip("-_")
        if handle not in seen:
            seen.append(handle)
    return seen


def route_message(
    text: str,
    *,
    roles: list[RosterRole],
    groups: dict[str, list[str]] | None = None,
    mode: str = "sticky",
    sticky: str = "",
) -> Route:
    by_handle = {role.handle: role for role in roles}
    groups = {name.lower(): members for name, members in (groups or {}).items()}
    addressed: list[str] = []
    unknown: list[str] = []
    individual: list[str] = []
    for handle in mentions(text):
        if handle == ALL_HANDLE:
            members = [role.handle for role in roles]
        elif handle in groups:
            members = [member for member in groups[handle] if member in by_handle]
        elif handle in by_handle:
            members = [handle]
            individual.append(handle)
        else:
            unknown.append(handle)
            continue
        addressed += [member for member in members if member not in addressed]

    new_sticky = individual[-1] if individual else sticky
    # A message whose only mentions are typos reaches nobody: the person is told instead.
    if not addressed and not unknown:
        if mode == "broadcast":
            addressed = [role.handle for role in roles]
        else:
            fallback = sticky if sticky in by_handle else ""
            fallback = fallback or next((r.handle for r in roles if r.is_default), "")
            addressed = [fallback] if fallback else []
    named = set(mentions(text))
    # Muted roles are skipped everywhere; the person is told only when they named one.
    muted = tuple(h for h in addressed if by_handle[h].muted and h in named)
    active = [h for h in addressed if not by_handle[h].muted]
    return Route(
        parallel=tuple(h for h in active if not by_handle[h].answers_last),
        last=tuple(h for h in active if by_handle[h].answers_last),
        unknown=tuple(unknown),
        muted=muted,
        sticky=new_sticky if new_sticky in by_handle else "",
    )
