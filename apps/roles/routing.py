"""Who answers a message: @-mentions, groups, sticky/broadcast modes, mutes, answers-last.

A pure function over plain data. It decides only *who* is called and in which order; every
addressed role receives the whole message. The rules:

- A message that **starts** with mentions addresses just the mentioned roles and groups.
- Mentions **scattered** through a message address the sticky role (or, in broadcast mode,
  everyone) **plus** every mentioned role.
- No mention: the sticky role (sticky mode, else the default role) or everyone (broadcast).
- Auto-rounds follow only a *fan-out* — a broadcast, `@all` or a group handle; a message
  directed at members by name is answered by them alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ALL_HANDLE = "all"
# `@` after a word character is an e-mail address, not a mention.
MENTION = re.compile(r"(?<![\w.@/+-])@([A-Za-z][A-Za-z0-9_-]*)")
CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)
LEADING_MENTIONS = re.compile(r"^\s*(?:@[A-Za-z][A-Za-z0-9_-]*[\s,:;]*)+")


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
    sticky: str = ""  # the thread's sticky role after this message
    fan_out: bool = False  # a broadcast or group turn: auto-rounds may follow

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


def leading_mentions(text: str) -> list[str]:
    """The handles a message starts with (`@director @visual redo` → both)."""
    match = LEADING_MENTIONS.match(text)
    return mentions(match.group(0)) if match else []


WORD = re.compile(r"[a-z]{4,}")
STOP_WORDS = {
    "with", "from", "that", "this", "what", "when", "which", "your", "their", "about",
    "should", "would", "could", "every", "there", "where", "have", "does", "into",
}  # fmt: skip


def _stems(text: str) -> set[str]:
    """Words of four letters or more, cut to their first five: "lighting" meets "light"."""
    return {word[:5] for word in WORD.findall(text.lower()) if word not in STOP_WORDS}


def best_placed(
    text: str, *, descriptions: dict[str, str], exclude: str = ""
) -> tuple[str, str] | None:
    """The role whose description a message's words match best — (handle, the matched word)
    — when one clearly does: at least one word in common and more than any other role.
    Rules only: no model is called."""
    words = {word[:5]: word for word in reversed(WORD.findall(text.lower()))}
    scores = []
    for handle, description in descriptions.items():
        if handle == exclude:
            continue
        matched = sorted(set(words) & _stems(description))
        scores.append((len(matched), handle, matched))
    scores.sort(key=lambda item: -item[0])
    if not scores or scores[0][0] == 0 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
        return None
    _, handle, matched = scores[0]
    return handle, words[matched[0]]


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
    fan_out = False
    named = mentions(text)
    for handle in named:
        if handle == ALL_HANDLE:
            members, fan_out = [role.handle for role in roles], True
        elif handle in groups:
            members = [member for member in groups[handle] if member in by_handle]
            fan_out = True
        elif handle in by_handle:
            members = [handle]
            individual.append(handle)
        else:
            unknown.append(handle)
            continue
        addressed += [member for member in members if member not in addressed]

    default = sticky if sticky in by_handle else ""
    default = default or next((r.handle for r in roles if r.is_default), "")
    scattered = bool(named) and not leading_mentions(text)
    # A message that starts with typos reaches nobody: the person is told instead.
    if scattered or (not addressed and not unknown):
        if mode == "broadcast":
            base, fan_out = [role.handle for role in roles], True
        else:
            base = [default] if default else []
        addressed = base + [handle for handle in addressed if handle not in base]
    # Scattered mentions call others in; the person still talks to the sticky role.
    new_sticky = sticky if scattered or not individual else individual[-1]
    # Muted roles are skipped everywhere; the person is told only when they named one.
    muted = tuple(h for h in addressed if by_handle[h].muted and h in named)
    active = [h for h in addressed if not by_handle[h].muted]
    return Route(
        parallel=tuple(h for h in active if not by_handle[h].answers_last),
        last=tuple(h for h in active if by_handle[h].answers_last),
        unknown=tuple(unknown),
        muted=muted,
        sticky=new_sticky if new_sticky in by_handle else "",
        fan_out=fan_out,
    )
