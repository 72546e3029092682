"""Auto-rounds: the roles continue among themselves after a turn, one at a time.

Round-robin in the session's round order (answers-last roles close each round), bounded by
the round cap and, optionally, a token budget, a wall-clock limit and a stop phrase; with AI
mentions on, a reply that names another role hands it the next slot. The next member's
waiting bubble is created while the current one streams. Called under the turn's row lock.
"""

from __future__ import annotations

import contextlib

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.chat.council.dispatch import dispatch
from apps.chat.display import events
from apps.chat.models import (
    Message,
    MessageStatus,
    Session,
    Stage,
    Thread,
    Turn,
    TurnStop,
)
from apps.chat.records.budgets import budget_reserve, usage_total
from apps.chat.records.messages import allocate_seqs, notice_create
from apps.chat.records.replies import reply_placeholder, reply_retarget
from apps.roles.models import Role
from apps.roles.routing import mentions


def round_order(session: Session) -> list[Role]:
    """One round: every unmuted role once, in the session's order (its `round_order`, then the
    roles' own), the answers-last roles at the end."""
    roles = [
        link.role
        for link in session.session_roles.select_related("role")
        .filter(muted=False)
        .order_by("role__sort_order", "role__handle")
    ]
    chosen = [handle for handle in session.round_order if isinstance(handle, str)]
    roles.sort(key=lambda r: chosen.index(r.handle) if r.handle in chosen else len(chosen))
    return [r for r in roles if not r.answers_last] + [r for r in roles if r.answers_last]


def rounds_cap(turn: Turn, order: list[Role]) -> int:
    """How many auto-round replies the turn may have in all."""
    return min(turn.auto_rounds, settings.PARLEY_MAX_AUTO_ROUNDS) * len(order)


def turn_tokens(replies: list[Message]) -> int:
    """Every token the turn's replies used: input (cached or not) and output."""
    return sum(usage_total(reply.usage) for reply in replies)


def _stop_reason(turn: Turn, session: Session, replies: list[Message]) -> tuple[str, str]:
    """Which budget, if any, the turn has reached, and the figures to show."""
    phrase = session.stop_phrase.strip()
    # Any settled reply of the turn counts: in a fan-out, the one that said it may not be
    # the last to finish.
    said = [
        m
        for m in replies
        if phrase and not m.is_user and not m.in_flight and phrase.lower() in m.text.lower()
    ]
    if said:
        return TurnStop.PHRASE, f"@{said[-1].speaker} said “{phrase}”"
    if session.turn_token_budget:
        used = turn_tokens(replies)
        if used >= session.turn_token_budget:
            return TurnStop.TOKENS, f"{used:,} of {session.turn_token_budget:,} tokens used"
    if session.turn_time_limit:
        elapsed = (timezone.now() - turn.created_at).total_seconds()
        if elapsed >= session.turn_time_limit:
            return TurnStop.TIME, f"{elapsed:.0f} s of {session.turn_time_limit} s"
    return "", ""


def _mentioned_next(replies: list[Message], order: list[Role]) -> Role | None:
    """The role the latest reply addressed: another unmuted member of the session."""
    settled = [m for m in replies if m.status == MessageStatus.DONE and m.text]
    if not settled:
        return None
    latest = settled[-1]
    members = {role.handle: role for role in order}
    for handle in mentions(latest.text):
        if handle in members and handle != latest.speaker:
            return members[handle]
    return None


def _round_robin(turn: Turn, order: list[Role]) -> Role | None:
    if len(order) < 2 or turn.auto_replies_done >= rounds_cap(turn, order):
        return None
    return order[turn.auto_replies_done % len(order)]


def _placeholder(turn: Turn, thread: Thread, session: Session, role: Role) -> Message:
    """The next auto-round reply, charged to whoever started the turn (ValidationError once
    their daily budget is used up)."""
    author = turn.user_message.author if turn.user_message is not None else None
    budget_day = budget_reserve(session=session, person=author, replies=1)
    (seq,) = allocate_seqs(thread, 1)
    reply = reply_placeholder(
        thread=thread, session=session, role=role, seq=seq, turn=turn, stage=Stage.AUTO_ROUND,
        budget_day=budget_day,
    )  # fmt: skip
    turn.auto_replies_done += 1
    Turn.objects.filter(pk=turn.pk).update(auto_replies_done=turn.auto_replies_done)
    events.publish_messages_added_on_commit(thread=thread, messages=[reply])
    return reply


def next_auto_reply(turn: Turn, replies: list[Message]) -> list[Message]:
    """Start the turn's next auto-round reply, or end its rounds with a notice saying why."""
    thread = Thread.objects.select_related("session__credential").get(pk=turn.thread_id)
    session = thread.session
    waiting = [
        m
        for m in replies
        if m.stage == Stage.AUTO_ROUND and m.status == MessageStatus.QUEUED and not m.dispatched_at
    ]
    if turn.rounds_stopped or not turn.auto_rounds:
        return []
    order = round_order(session)
    reason, figures = _stop_reason(turn, session, replies)
    if reason:
        _stop_rounds(turn, thread, reason, figures)
        return []
    mention = _mentioned_next(replies, order) if session.ai_mentions else None
    reply = waiting[0] if waiting else None
    if reply is None:
        if turn.mentions_only:
            within = turn.auto_replies_done < rounds_cap(turn, order)
            role = mention if within else None
        else:
            role = _round_robin(turn, order)
        if role is None:
            _finish_rounds(turn, thread)
            return []
        try:
            reply = _placeholder(turn, thread, session, role)
        except ValidationError:
            who = "the daily budget of the person who started the turn"
            _stop_rounds(turn, thread, TurnStop.TOKENS, who)
            return []
    elif mention is not None and mention.handle != reply.speaker:
        reply = reply_retarget(message=reply, session=session, role=mention)
    dispatch([reply])
    following = None if turn.mentions_only else _round_robin(turn, order)
    if following is not None:  # shown as waiting while this one streams
        with contextlib.suppress(ValidationError):  # past the budget: it never shows
            _placeholder(turn, thread, session, following)
    events.publish_thread_status_on_commit(thread=thread)
    return [reply]


def _finish_rounds(turn: Turn, thread: Thread) -> None:
    """The rounds are over (or never could start): the line above the composer goes."""
    if turn.auto_replies_done and not turn.stopped_because:
        Turn.objects.filter(pk=turn.pk).update(stopped_because=TurnStop.ROUNDS)
    events.publish_thread_status_on_commit(thread=thread)


def _stop_rounds(turn: Turn, thread: Thread, reason: str, figures: str) -> None:
    """End the turn's rounds at once: no further reply starts, the waiting one goes."""
    Turn.objects.filter(pk=turn.pk).update(rounds_stopped=True, stopped_because=reason)
    remove_waiting_auto(thread=thread)
    label = TurnStop(reason).label
    notice = notice_create(
        thread=thread, text=f"Auto-rounds stopped: {label} was reached ({figures})."
    )
    events.publish_messages_added_on_commit(thread=thread, messages=[notice])
    events.publish_thread_status_on_commit(thread=thread)


def remove_waiting_auto(*, thread: Thread) -> None:
    """Delete the auto-round replies that were only shown as waiting, everywhere."""
    waiting = list(
        Message.objects.filter(
            thread=thread,
            stage=Stage.AUTO_ROUND,
            status=MessageStatus.QUEUED,
            dispatched_at__isnull=True,
        )
    )
    for message in waiting:
        events.publish_message_removed_on_commit(message=message)
    Message.objects.filter(pk__in=[m.pk for m in waiting]).delete()
