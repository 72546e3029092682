"""Slash commands: typed in the composer, answered with a notice, never sent to a model.

A command that cannot run raises ValidationError, so the composer keeps the text and shows
why. `//text` sends "/text" as an ordinary message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from apps.chat.council import orchestration
from apps.chat.council.posted import PostedMessage
from apps.chat.council.replies import replies_to_retry, reply_rerun
from apps.chat.display import events
from apps.chat.models import (
    AddressingMode,
    QueuedMessage,
    Session,
    Thread,
    TurnMode,
    parse_reply_length,
    reply_words,
)
from apps.chat.records.messages import notice_create
from apps.chat.records.text import validate_message_text
from apps.chat.records.threads import thread_create, thread_rename
from apps.chat.selectors import session_links
from apps.roles.routing import mentions

COMMAND = re.compile(r"^/([A-Za-z]+)(?:\s+(.*))?$", re.S)


class CommandRun(Protocol):
    """What a command is: it runs in a thread of a session for its author, with the text
    after its name, and says what it did as a posted notice (or raises ValidationError)."""

    def __call__(
        self, *, thread: Thread, session: Session, author: Any, argument: str
    ) -> PostedMessage: ...


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    summary: str
    run: CommandRun


COMMANDS: dict[str, Command] = {}

KEYS_HELP = (
    "Keys: **Enter** sends, **Shift+Enter** starts a new line, **Esc** stops every reply, "
    "**@** opens the role list and **/** at the start of a message the command list (arrows "
    "to move, Tab or Enter to pick). Outside a text field: **g n** new chat, **g s** session "
    "settings, **/** the message box, **?** every shortcut."
)


def command(name: str, usage: str, summary: str) -> Callable[[CommandRun], CommandRun]:
    """Register a slash command (mypy checks its signature and what it returns)."""

    def register(function: CommandRun) -> CommandRun:
        COMMANDS[name] = Command(name, usage, summary, function)
        return function

    return register


def command_list() -> list[dict]:
    """Every command with its usage and summary, for the composer's "/" list."""
    return [
        {"name": entry.name, "usage": entry.usage, "summary": entry.summary}
        for entry in COMMANDS.values()
    ] + [WHISPER_HELP]


# Posting reads a whisper before any command (see `room_rules`); listed with the commands.
WHISPER_HELP = {
    "name": "whisper",
    "usage": "/whisper @role @username message",
    "summary": "a message only they (and you) see, with its replies",
}


def is_command(text: str) -> bool:
    return bool(COMMAND.match(text)) and not text.startswith("//")


def run_command(*, thread: Thread, author: Any, text: str) -> PostedMessage:
    match = COMMAND.match(text)
    if match is None:
        raise ValidationError("That is not a command.", code="unknown_command")
    name, argument = match.group(1).lower(), (match.group(2) or "").strip()
    entry = COMMANDS.get(name)
    if entry is None:
        raise ValidationError(
            f"There is no /{name} command. Try {', '.join('/' + c for c in COMMANDS)} — "
            "or start with // to send a message that begins with a slash.",
            code="unknown_command",
        )
    session = Session.objects.select_related("credential").get(pk=thread.session_id)
    if (
        author is not None
        and author.pk != session.owner_id
        and _changes_the_session(name, argument)
    ):
        raise ValidationError(
            f"Only the session's owner changes its settings (/{name}): its roles, modes, rounds "
            "and budgets are theirs. /length with a message sets the length of that turn alone.",
            code="owner_only",
        )
    posted = entry.run(thread=thread, session=session, author=author, argument=argument)
    if name in SESSION_COMMANDS:
        return replace(posted, controls_changed=True)
    return posted


# Commands that change the session every thread of the room shares (the owner's to change).
SESSION_COMMANDS = {"mute", "unmute", "mode", "rounds", "budget", "mentions", "autoroute"}


def _changes_the_session(name: str, argument: str) -> bool:
    if name in SESSION_COMMANDS:
        return True
    if name == "length":  # without a message it sets the session's default
        return len(argument.split(None, 1)) < 2
    return name == "queue" and argument.lower() == "clear"


def _notice(thread: Thread, text: str) -> PostedMessage:
    with transaction.atomic():
        notice = notice_create(thread=thread, text=text)
        events.publish_messages_added_on_commit(thread=thread, messages=[notice])
    return PostedMessage(user_message=None, replies=[], notices=[notice])


def _session_handles(session: Session, argument: str, usage: str) -> list[str]:
    handles = mentions(argument)
    if not handles:
        raise ValidationError(f"Name the role: {usage}", code="bad_command")
    known = set(session.session_roles.values_list("role__handle", flat=True))
    unknown = [h for h in handles if h not in known]
    if unknown:
        raise ValidationError(
            f"Nobody in this chat is called {', '.join('@' + h for h in unknown)}. "
            f"The roles here: {', '.join('@' + h for h in sorted(known))}.",
            code="bad_command",
        )
    return handles


@command("help", "/help", "list the commands, keys and roles")
def help_command(*, thread: Thread, session: Session, author: Any, argument: str) -> PostedMessage:
    lines = ["**Commands**"]
    lines += [f"- `{entry['usage']}` — {entry['summary']}" for entry in command_list()]
    roster = ", ".join(
        f"@{link.role.handle}{' (muted)' if link.muted else ''}"
        for link in session_links(session=session)
    )
    lines += [
        "",
        f"**Roles:** {roster}; `@all` addresses every unmuted role.",
        f"**Mode:** {session.addressing_mode}, {session.turn_mode} · "
        f"**Auto-rounds:** {session.auto_rounds} · {_budget_text(session)} · "
        f"**Reply length:** {session.reply_length} · "
        f"**AI mentions:** {'on' if session.ai_mentions else 'off'} · "
        f"**Auto-route:** {'on' if session.auto_route else 'off'}",
        "",
        KEYS_HELP,
    ]
    return _notice(thread, "\n".join(lines))


def _set_muted(
    session: Session, thread: Thread, argument: str, muted: bool, usage: str
) -> PostedMessage:
    handles = _session_handles(session, argument, usage)
    session.session_roles.filter(role__handle__in=handles).update(muted=muted)
    events.publish_session_controls_on_commit(session=session)
    names = ", ".join(f"@{h}" for h in handles)
    if muted:
        text = f"{names} muted: skipped in every call until `/unmute {names}`."
    else:
        text = f"{names} unmuted: they take part again."
    return _notice(thread, text)


@command("mute", "/mute @handle", "skip a role in every call (saves tokens)")
def mute_command(*, thread: Thread, session: Session, author: Any, argument: str) -> PostedMessage:
    return _set_muted(session, thread, argument, True, "/mute @handle")


@command("unmute", "/unmute @handle", "let a muted role take part again")
def unmute_command(
    *, thread: Thread, session: Session, author: Any, argument: str
) -> PostedMessage:
    return _set_muted(session, thread, argument, False, "/unmute @handle")


MODES = {
    "sticky": "messages without a mention go to the last role you addressed in this thread.",
    "broadcast": "messages without a mention go to every unmuted role.",
    "parallel": "a fan-out's first round answers in parallel (the answers-last roles after "
    "them), then the auto-rounds go round-robin.",
    "sequential": "a fan-out's roles answer one at a time from the start, in the round order, "
    "each seeing the ones before.",
}


@command("mode", "/mode sticky|broadcast|parallel|sequential", "who answers, and in which order")
def mode_command(*, thread: Thread, session: Session, author: Any, argument: str) -> PostedMessage:
    mode = argument.lower()
    if mode not in MODES:
        raise ValidationError(
            "Use /mode sticky or /mode broadcast (where messages without a mention go), or "
            "/mode parallel or /mode sequential (how a fan-out's first round runs).",
            code="bad_command",
        )
    if mode in AddressingMode.values:
        session.addressing_mode = mode
    else:
        session.turn_mode = TurnMode.SEQUENTIAL if mode == "sequential" else TurnMode.BROADCAST
    session.save(update_fields=["addressing_mode", "turn_mode", "updated_at"])
    events.publish_session_controls_on_commit(session=session)
    return _notice(thread, f"Mode: **{mode}** — {MODES[mode]}")


@command("rounds", "/rounds N", "let the roles continue among themselves for N rounds (0 = off)")
def rounds_command(
    *, thread: Thread, session: Session, author: Any, argument: str
) -> PostedMessage:
    limit = settings.PARLEY_MAX_AUTO_ROUNDS
    # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
    if not re.fullmatch(r"[0-9]{1,3}", argument) or int(argument) > limit:
        raise ValidationError(f"Use /rounds with a number from 0 to {limit}.", code="bad_command")
    session.auto_rounds = int(argument)
    session.save(update_fields=["auto_rounds", "updated_at"])
    if session.auto_rounds == 0:
        return _notice(thread, "Auto-rounds are off: only the roles you address answer.")
    text = (
        f"Auto-rounds: after each of your messages the roles continue for up to "
        f"{session.auto_rounds} round(s), one at a time. A new message or Esc stops them."
    )
    if session.session_roles.filter(muted=False).count() < 2:
        text += " They need at least two unmuted roles in the session; until then none run."
    return _notice(thread, text)


@command("new", "/new", "start a new chat in this session")
def new_command(*, thread: Thread, session: Session, author: Any, argument: str) -> PostedMessage:
    new_thread = thread_create(session=session)
    return PostedMessage(user_message=None, replies=[], redirect_to=new_thread)


@command("rename", "/rename NAME", "rename this thread")
def rename_command(
    *, thread: Thread, session: Session, author: Any, argument: str
) -> PostedMessage:
    if not argument:
        raise ValidationError("Give the new name: /rename NAME", code="bad_command")
    thread = thread_rename(thread=thread, label=argument)
    return _notice(thread, f"Thread renamed to “{thread.label}”.")


@command("retry", "/retry", "run the last turn's failed or stopped replies again")
def retry_command(*, thread: Thread, session: Session, author: Any, argument: str) -> PostedMessage:
    failed = replies_to_retry(thread=thread)
    if not failed:
        return _notice(thread, "Nothing to retry: every reply of the last turn finished.")
    with transaction.atomic():  # all of them, or none past the budget
        replies = [reply_rerun(message=message, by=author) for message in failed]
    names = ", ".join(f"@{m.speaker}" for m in replies)
    posted = _notice(thread, f"Retrying {names}.")
    return PostedMessage(user_message=None, replies=[], notices=posted.notices)


def _budget_text(session: Session) -> str:
    parts = [
        f"{session.turn_token_budget:,} tokens" if session.turn_token_budget else "",
        f"{session.turn_time_limit} s" if session.turn_time_limit else "",
        f"stop phrase “{session.stop_phrase}”" if session.stop_phrase else "",
    ]
    chosen = [part for part in parts if part]
    return "**Budget:** " + (", ".join(chosen) if chosen else "rounds only")


BUDGET = re.compile(r"([0-9]{1,9})\s*(tokens?|s|sec|seconds?|m|min|minutes?)")
BUDGET_USAGE = "/budget N tokens | N s | stop PHRASE | off"


@command("budget", BUDGET_USAGE, "also end auto-rounds at a token budget, a time or a phrase")
def budget_command(
    *, thread: Thread, session: Session, author: Any, argument: str
) -> PostedMessage:
    match = BUDGET.fullmatch(argument.lower())
    if argument.lower() == "off":
        session.turn_token_budget = session.turn_time_limit = 0
        session.stop_phrase = ""
    elif argument.lower().startswith("stop "):
        phrase = " ".join(argument[5:].split()).strip("\"'“”")
        if not phrase or len(phrase) > 80:
            raise ValidationError("Give a stop phrase of 1 to 80 characters.", code="bad_command")
        session.stop_phrase = phrase
    elif match:
        amount, unit = int(match.group(1)), match.group(2)
        if unit.startswith("token"):
            session.turn_token_budget = amount
        else:
            session.turn_time_limit = amount * 60 if unit.startswith("m") else amount
    elif argument:
        raise ValidationError(f"Use {BUDGET_USAGE}.", code="bad_command")
    session.save(
        update_fields=["turn_token_budget", "turn_time_limit", "stop_phrase", "updated_at"]
    )
    return _notice(
        thread,
        f"{_budget_text(session)}. Auto-rounds also stop after {session.auto_rounds} round(s); "
        "the turn ends, with a notice saying why, when any limit is reached.",
    )


@command("length", "/length short|normal|long|N [message]", "how long replies are (N words)")
def length_command(
    *, thread: Thread, session: Session, author: Any, argument: str
) -> PostedMessage:
    value, _, message = argument.partition(" ")
    try:
        length = parse_reply_length(value)
    except ValueError as exc:
        raise ValidationError(str(exc), code="bad_command") from None
    message = message.strip()
    if message:  # this message only
        text = validate_message_text(message)
        return orchestration.message_enter(
            thread=thread, author=author, text=text, client_token=None, reply_length=length
        )
    session.reply_length = length
    session.save(update_fields=["reply_length", "updated_at"])
    words = reply_words(length)
    budget = f"under {words} words" if words else "as long as each role's own rules say"
    return _notice(thread, f"Reply length: **{length}** — replies are asked to stay {budget}.")


@command(
    "autoroute", "/autoroute on|off", "a message without a mention may go to the best-placed role"
)
def autoroute_command(
    *, thread: Thread, session: Session, author: Any, argument: str
) -> PostedMessage:
    if argument.lower() not in ("on", "off"):
        raise ValidationError("Use /autoroute on or /autoroute off.", code="bad_command")
    session.auto_route = argument.lower() == "on"
    session.save(update_fields=["auto_route", "updated_at"])
    events.publish_session_controls_on_commit(session=session)
    if not session.auto_route:
        return _notice(thread, "Auto-route off: messages without a mention go where they did.")
    return _notice(
        thread,
        "Auto-route on: a message without a mention that would go to the default role may go "
        "to the role whose work it is about; the message says where it went, with an undo.",
    )


@command("mentions", "/mentions on|off", "a reply that mentions @role has that role answer next")
def mentions_command(
    *, thread: Thread, session: Session, author: Any, argument: str
) -> PostedMessage:
    if argument.lower() not in ("on", "off"):
        raise ValidationError("Use /mentions on or /mentions off.", code="bad_command")
    session.ai_mentions = argument.lower() == "on"
    session.save(update_fields=["ai_mentions", "updated_at"])
    if not session.ai_mentions:
        return _notice(thread, "AI mentions off: only you decide who answers.")
    return _notice(
        thread,
        "AI mentions on: when a reply mentions another @role, that role answers next, within "
        f"the auto-round budget ({session.auto_rounds} round(s); `/rounds N` changes it).",
    )


@command("queue", "/queue [clear]", "list the messages waiting for the current turn, or drop them")
def queue_command(*, thread: Thread, session: Session, author: Any, argument: str) -> PostedMessage:
    queued = list(QueuedMessage.objects.filter(thread=thread))
    if argument.lower() == "clear":
        QueuedMessage.objects.filter(pk__in=[q.pk for q in queued]).delete()
        events.publish_thread_status_on_commit(thread=thread)
        return _notice(thread, f"Dropped {len(queued)} queued message(s).")
    if argument:
        raise ValidationError("Use /queue or /queue clear.", code="bad_command")
    if not queued:
        return _notice(thread, "Nothing is queued: a message sent now starts at once.")
    lines = [f"{i}. {q.text[:200]}" for i, q in enumerate(queued, 1)]
    return _notice(thread, "**Queued** (sent in this order):\n" + "\n".join(lines))
