"""When each reply of a turn runs: the parallel stage, the answers-last stage, auto-rounds.

Every reply is a placeholder message created up front (auto-rounds: one at a time) and a
Celery task enqueued when its stage may start. Workers call `turn_advance` after settling a
reply; it holds the turn's row lock, so two replies finishing together dispatch the next
stage once. Nothing here waits: a failed reply settles like any other, so it never blocks the
rest.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from apps.chat.council.dispatch import dispatch
from apps.chat.display import events
from apps.chat.models import IN_FLIGHT, Message, MessageStatus, Session, Stage, Thread, Turn
from apps.chat.records.messages import allocate_seqs
from apps.chat.records.replies import reply_placeholder
from apps.roles.models import Role


def first_dispatch(*, replies: list[Message], stagger: bool) -> None:
    """Start a new turn: its parallel stage, or its last stage when nobody else answers.

    With `stagger`, one parallel reply starts first and the others when its response has
    begun (`turn_release`), so they read the prompt-cache entry it writes.
    """
    parallel = [m for m in replies if m.stage == Stage.PARALLEL]
    stage = parallel or [m for m in replies if m.stage == Stage.LAST]
    dispatch(stage[:1] if stagger and len(parallel) > 1 else stage)


def _locked_turn(turn_id: int) -> Turn | None:
    return Turn.objects.select_for_update().filter(pk=turn_id).first()


def turn_release(*, message_id: int) -> None:
    """A staggered reply's response has begun: start the rest of its stage."""
    with transaction.atomic():
        message = Message.objects.get(pk=message_id)
        if message.turn_id is None or _locked_turn(message.turn_id) is None:
            return
        waiting = Message.objects.filter(
            turn_id=message.turn_id,
            stage=message.stage,
            status=MessageStatus.QUEUED,
            dispatched_at__isnull=True,
        ).order_by("seq")
        dispatch(list(waiting))


def turn_advance(*, turn_id: int) -> list[Message]:
    """Start whatever may run now that one of the turn's replies has settled."""
    with transaction.atomic():
        turn = _locked_turn(turn_id)
        if turn is None:
            return []
        replies = list(turn.messages.order_by("seq"))
        waiting = [m for m in replies if m.status == MessageStatus.QUEUED and not m.dispatched_at]
        running = [m for m in replies if m.status in IN_FLIGHT and m.dispatched_at]
        if waiting:
            stage = min(m.stage for m in waiting)
            if any(m.stage < stage for m in running):
                return []
            ready = [m for m in waiting if m.stage == stage]
            dispatch(ready)
            return ready
        if running or turn.rounds_stopped:
            return []
        auto = _next_auto_reply(turn)
        return [auto] if auto else []


def auto_round_order(session: Session) -> list[Role]:
    """One round: every unmuted role once, the answers-last roles at the end."""
    roles = [
        link.role
        for link in session.session_roles.select_related("role")
        .filter(muted=False)
        .order_by("role__sort_order", "role__handle")
    ]
    return [r for r in roles if not r.answers_last] + [r for r in roles if r.answers_last]


def _next_auto_reply(turn: Turn) -> Message | None:
    thread = Thread.objects.select_related("session__credential").get(pk=turn.thread_id)
    session = thread.session
    order = auto_round_order(session)
    rounds = min(turn.auto_rounds, settings.PARLEY_MAX_AUTO_ROUNDS)
    if len(order) < 2 or turn.auto_replies_done >= rounds * len(order):
        return None
    role = order[turn.auto_replies_done % len(order)]
    (seq,) = allocate_seqs(thread, 1)
    reply = reply_placeholder(
        thread=thread, session=session, role=role, seq=seq, turn=turn, stage=Stage.AUTO_ROUND
    )
    Turn.objects.filter(pk=turn.pk).update(auto_replies_done=turn.auto_replies_done + 1)
    events.publish_messages_added_on_commit(thread=thread, messages=[reply])
    dispatch([reply])
    return reply


def turns_stop_rounds(*, thread: Thread) -> None:
    """No further auto-round starts in this thread (a newer message or an interrupt)."""
    Turn.objects.filter(thread=thread, rounds_stopped=False).update(rounds_stopped=True)
