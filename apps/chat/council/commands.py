"""Slash commands: typed in the composer, answered with a notice, never sent to a model.

A command that cannot run raises ValidationError, so the composer keeps the text and shows
why. `//text` sends "/text" as an ordinary message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from apps.chat.council.posted import PostedMessage
from apps.chat.council.replies import replies_to_retry, reply_rerun
from apps.chat.display import events
from apps.chat.models import AddressingMode, Session, Thread
from apps.chat.records.messages import notice_create
from apps.chat.records.threads import thread_create, thread_rename
from apps.chat.selectors import session_links
from apps.roles.routing import mentions

COMMAND = re.compile(r"^/([A-Za-z]+)(?:\s+(.*))?$", re.S)


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    summary: str
    run: Callable[..., PostedMessage]


COMMANDS: dict[str, Command] = {}

KEYS_HELP = (
    "Keys: **Enter** sends, **Shift+Enter** starts a new line, **Esc** stops every reply, "
    "**@** opens the role list (arrows to move, Tab or Enter to pick)."
)


def command(name: str, usage: str, summary: str):
    def register(function):
        COMMANDS[name] = Command(name, usage, summary, function)
        return function

    return register


def is_command(text: str) -> bool:
    return bool(COMMAND.match(text)) and not text.startswith("//")


def run_command(*, thread: Thread, author, text: str) -> PostedMessage:
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
    return entry.run(thread=thread, session=session, author=author, argument=argument)


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
def help_command(*, thread, session, author, argument):
    lines = ["**Commands**"]
    lines += [f"- `{entry.usage}` — {entry.summary}" for entry in COMMANDS.values()]
    roster = ", ".join(
        f"@{link.role.handle}{' (muted)' if link.muted else ''}"
        for link in session_links(session=session)
    )
    lines += [
        "",
        f"**Roles:** {roster}; `@all` addresses every unmuted role.",
        f"**Mode:** {session.addressing_mode} · **Auto-rounds:** {session.auto_rounds}",
        "",
        KEYS_HELP,
    ]
    return _notice(thread, "\n".join(lines))


def _set_muted(session: Session, thread: Thread, argument: str, muted: bool, usage: str):
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
def mute_command(*, thread, session, author, argument):
    return _set_muted(session, thread, argument, True, "/mute @handle")


@command("unmute", "/unmute @handle", "let a muted role take part again")
def unmute_command(*, thread, session, author, argument):
    return _set_muted(session, thread, argument, False, "/unmute @handle")


@command("mode", "/mode sticky|broadcast", "where messages without a mention go")
def mode_command(*, thread, session, author, argument):
    mode = argument.lower()
    if mode not in AddressingMode.values:
        raise ValidationError("Use /mode sticky or /mode broadcast.", code="bad_command")
    session.addressing_mode = mode
    session.save(update_fields=["addressing_mode", "updated_at"])
    events.publish_session_controls_on_commit(session=session)
    explained = {
        "sticky": "messages without a mention go to the last role you addressed.",
        "broadcast": "messages without a mention go to every unmuted role.",
    }
    return _notice(thread, f"Mode: **{mode}** — {explained[mode]}")


@command("rounds", "/rounds N", "let the roles continue among themselves for N rounds (0 = off)")
def rounds_command(*, thread, session, author, argument):
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
def new_command(*, thread, session, author, argument):
    new_thread = thread_create(session=session)
    return PostedMessage(user_message=None, replies=[], redirect_to=new_thread)


@command("rename", "/rename NAME", "rename this thread")
def rename_command(*, thread, session, author, argument):
    if not argument:
        raise ValidationError("Give the new name: /rename NAME", code="bad_command")
    thread = thread_rename(thread=thread, label=argument)
    return _notice(thread, f"Thread renamed to “{thread.label}”.")


@command("retry", "/retry", "run the last turn's failed or stopped replies again")
def retry_command(*, thread, session, author, argument):
    failed = replies_to_retry(thread=thread)
    if not failed:
        return _notice(thread, "Nothing to retry: every reply of the last turn finished.")
    replies = [reply_rerun(message=message) for message in failed]
    names = ", ".join(f"@{m.speaker}" for m in replies)
    posted = _notice(thread, f"Retrying {names}.")
    return PostedMessage(user_message=None, replies=[], notices=posted.notices)
