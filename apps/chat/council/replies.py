"""Replies that run again, stop, restart or are recovered after a worker died."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from apps.chat import livestate
from apps.chat.access import session_roles_by_handle
from apps.chat.council import orchestration
from apps.chat.council.dispatch import QUEUED_GRACE_SECONDS, dispatch, enqueue_reply
from apps.chat.display import events
from apps.chat.models import (
    IN_FLIGHT,
    Message,
    MessageKind,
    MessageStatus,
    QueuedMessage,
    Session,
    Thread,
    Turn,
    person_name,
)
from apps.chat.records.budgets import budget_reserve
from apps.chat.records.messages import notice_create
from apps.chat.records.replies import message_finish
from apps.chat.records.text import storable
from apps.chat.selectors import reply_provider

# Stop settles within a second: workers answer an interrupt in well under this; a reply whose
# worker is gone is settled by the web process instead.
INTERRUPT_WAIT_SECONDS = 0.8
INTERRUPT_POLL_SECONDS = 0.05
REDISPATCH_SECONDS = 2 * livestate.LEASE_RENEW_SECONDS


def reply_rerun(*, message: Message, by=None) -> Message:
    """Run a role's reply again (Retry after an error, Regenerate after any ending).

    The message keeps its place in the transcript; its previous text, if any, is kept in
    `alternatives`. The current session settings apply, so a fixed key or a new model is used.
    The new run is charged to `by`'s daily budget (refused once it is used up); without `by`
    (the worker retrying on its own) to the budget the reply was charged to.
    """
    if message.kind != MessageKind.CHAT or message.is_user:
        raise ValidationError("Only a role's reply can be run again.")
    thread = message.thread
    session = Session.objects.select_related("credential").get(pk=thread.session_id)
    role = session_roles_by_handle(session, {message.speaker}).get(message.speaker)
    if role is None:
        raise ValidationError(f"The role @{message.speaker} no longer exists.")
    with transaction.atomic():
        if message.turn_id is not None:
            orchestration.locked_turn(message.turn_id)
        # Re-read under a row lock: a double-click must not queue the reply twice or keep
        # the same earlier text twice.
        message = Message.objects.select_for_update().get(pk=message.pk)
        if message.in_flight:
            raise ValidationError("That reply is still running; stop it first.")
        if by is not None:
            message.budget_day = budget_reserve(session=session, person=by, replies=1)
        alternatives = list(message.alternatives)
        if message.text:
            alternatives.append(
                {
                    "content": message.content,
                    "status": message.status,
                    "model": message.model,
                    "finished_at": message.finished_at.isoformat() if message.finished_at else "",
                }
            )
        provider, model, credential = reply_provider(session=session, role=role)
        message.alternatives = alternatives
        message.status = MessageStatus.QUEUED
        message.content, message.error, message.usage = [], "", {}
        message.provider, message.model, message.credential = provider, model, credential
        message.ttft_ms = message.duration_ms = message.started_at = message.finished_at = None
        message.attempt = 0  # a new version: takeovers are counted afresh
        message.save()
        livestate.withdraw_cancel(str(message.public_id))
        events.publish_message_replaced_on_commit(message=message, seq=0)
        dispatch([message])
    return message


def reply_continue(*, message: Message, by=None) -> Message:
    """Let a cut-off reply go on from its last word (Continue); its text stays and the model
    is asked to continue exactly where it stopped. Charged to `by`'s daily budget."""
    with transaction.atomic():
        if message.turn_id is not None:
            orchestration.locked_turn(message.turn_id)
        charge = {}
        if by is not None:
            session = Session.objects.get(pk=message.thread.session_id)
            charge["budget_day"] = budget_reserve(session=session, person=by, replies=1)
        updated = Message.objects.filter(
            pk=message.pk, status=MessageStatus.DONE, stop_reason="max_tokens"
        ).update(
            status=MessageStatus.QUEUED, stop_reason="", attempt=0,
            finished_at=None, started_at=None, dispatched_at=None, **charge,
        )  # fmt: skip
        if not updated:
            raise ValidationError("Only a reply that was cut off can be continued.")
        message.refresh_from_db()
        livestate.withdraw_cancel(str(message.public_id))
        events.publish_message_replaced_on_commit(message=message, seq=0)
        dispatch([message])
    return message


def replies_to_retry(*, thread: Thread) -> list[Message]:
    """The failed or interrupted replies of the thread's latest turn, for /retry."""
    latest = Turn.objects.filter(thread=thread).order_by("-pk").first()
    if latest is None:
        return []
    return list(
        latest.messages.filter(
            status__in=[MessageStatus.ERROR, MessageStatus.INTERRUPTED]
        ).order_by("seq")
    )


def thread_interrupt(*, thread: Thread, by=None) -> int:
    """Stop every queued and streaming reply of a thread; partial text is kept.

    Pending auto-rounds are cancelled and queued replies (waiting answers-last roles too) are
    settled here, so their tasks find nothing to claim; streaming ones are flagged, and their
    workers close the provider stream and store what they had. Messages the person queued
    are not replies: the next one starts once the turn has settled.
    """
    with transaction.atomic():
        orchestration.turns_stop_rounds(thread=thread)
        queued = list(thread.messages.filter(status=MessageStatus.QUEUED))
        Message.objects.filter(pk__in=[m.pk for m in queued]).update(
            status=MessageStatus.INTERRUPTED, finished_at=timezone.now()
        )
        for message in queued:
            message.status = MessageStatus.INTERRUPTED
            events.publish_message_replaced_on_commit(message=message, seq=events.SETTLED_SEQ)
    streaming = list(thread.messages.filter(status__in=IN_FLIGHT).values_list("pk", "public_id"))
    if by is not None and (queued or streaming) and thread.session.memberships.exists():
        _say_who_stopped(
            thread, by, [*queued, *Message.objects.filter(pk__in=[pk for pk, _ in streaming])]
        )
    livestate.request_cancel([str(public_id) for _, public_id in streaming])
    _settle_unanswered_interrupts(dict(streaming))
    orchestration.queue_next(thread_id=thread.pk)  # the turn has settled: the queue goes on
    return len(queued) + len(streaming)


def _say_who_stopped(thread: Thread, by, stopped: list[Message]) -> None:
    """In a shared room, the transcript says who stopped which replies."""
    roles = session_roles_by_handle(thread.session, {message.speaker for message in stopped})
    names = sorted(
        {roles[m.speaker].display_name if m.speaker in roles else m.speaker for m in stopped}
    )
    with transaction.atomic():
        notice = notice_create(thread=thread, text=f"{person_name(by)} stopped {', '.join(names)}.")
        events.publish_messages_added_on_commit(thread=thread, messages=[notice])


def queued_send_now(*, queued: QueuedMessage, by=None) -> None:
    """Stop the running turn (its partial text is kept) and post this queued message next."""
    if not orchestration.queued_jump(queued=queued):
        raise ValidationError("That message has already been sent.", code="gone")
    if queued.held_because:  # someone sends a held message on purpose: it is held no more
        QueuedMessage.objects.filter(pk=queued.pk).update(held_because="")
    thread_interrupt(thread=queued.thread, by=by)


def _settle_unanswered_interrupts(replies: dict[int, Any]) -> None:
    """Stop always works: a streaming reply whose worker is gone (or too busy to answer within
    the wait) is settled here as interrupted, with the text its tabs were shown. A worker
    that is alive after all only adds the text it had; a takeover finds nothing to claim."""
    deadline = time.monotonic() + INTERRUPT_WAIT_SECONDS
    pending = dict(replies)
    while True:
        still = set(
            Message.objects.filter(pk__in=pending, status=MessageStatus.STREAMING).values_list(
                "pk", flat=True
            )
        )
        pending = {pk: public_id for pk, public_id in pending.items() if pk in still}
        if not pending:
            return  # their workers settled them
        late = time.monotonic() >= deadline
        held = livestate.leases_held(list(pending))
        orphans = {pk: public_id for pk, public_id in pending.items() if late or pk not in held}
        _settle_interrupted(orphans)
        pending = {pk: public_id for pk, public_id in pending.items() if pk not in orphans}
        if not pending:
            return
        time.sleep(INTERRUPT_POLL_SECONDS)


def _settle_interrupted(replies: dict[int, Any]) -> None:
    if not replies:
        return
    shown = livestate.live_texts([str(public_id) for public_id in replies.values()])
    now = timezone.now()
    for message in Message.objects.filter(pk__in=replies, status=MessageStatus.STREAMING):
        text = livestate.text_shown(saved=message.text, tail=shown.get(str(message.public_id)))
        with transaction.atomic():
            settled = Message.objects.filter(pk=message.pk, status=MessageStatus.STREAMING).update(
                status=MessageStatus.INTERRUPTED,
                content=[{"type": "text", "text": storable(text.rstrip())}] if text.strip() else [],
                finished_at=now,
            )
            if settled:
                message.refresh_from_db()
                events.publish_message_replaced_on_commit(message=message, seq=events.SETTLED_SEQ)
        if settled and message.turn_id is not None:
            orchestration.turn_advance(turn_id=message.turn_id)


def session_restart_in_flight(*, session: Session) -> int:
    """Restart the session's running replies with its current settings.

    Waiting replies take the new provider and model in place; streaming ones are stopped and
    their workers run them again (the partial text is kept as an alternative).
    """
    in_flight = list(
        Message.objects.filter(thread__session=session, status__in=IN_FLIGHT).select_related(
            "thread"
        )
    )
    streaming = []
    for message in in_flight:
        if message.status == MessageStatus.QUEUED:
            role = session_roles_by_handle(session, {message.speaker}).get(message.speaker)
            if role is not None:
                provider, model, credential = reply_provider(session=session, role=role)
                Message.objects.filter(pk=message.pk, status=MessageStatus.QUEUED).update(
                    provider=provider, model=model, credential=credential
                )
        else:
            streaming.append(str(message.public_id))
    livestate.request_restart(streaming)
    return len(in_flight)


def replies_recover(*, grace_seconds: int = livestate.LEASE_TTL_SECONDS) -> list[int]:
    """Restart the replies that a dead worker or a lost broker message left behind.

    Runs when a worker starts and then periodically (`PARLEY_RECOVERY_INTERVAL_SECONDS`). A
    reply in flight whose lease has lapsed (nobody is streaming it) is enqueued again and its
    dispatch time renewed, so the next look gives its task another grace period; the lease
    makes a duplicate harmless. A turn whose replies have all settled but whose next stage
    never started is advanced.
    """
    now = timezone.now()
    cutoff = now - timedelta(seconds=grace_seconds)
    # A queued reply's task is most likely still in the broker, behind others: enqueueing it
    # again every few seconds would only pile up duplicates on a busy worker.
    queued_cutoff = now - timedelta(seconds=max(grace_seconds, QUEUED_GRACE_SECONDS))
    # A recent checkpoint also means a live stream: right after Redis restarted empty, its
    # worker re-takes the lease within a renewal, and must not be taken over meanwhile.
    # A streaming reply's task takes its lease within moments of reaching a live worker: once
    # two renewals have passed without one, the task died with a worker (perhaps one that was
    # taking the reply over) and is sent again — a takeover of a takeover is as quick as the first.
    redispatch_cutoff = now - timedelta(seconds=min(grace_seconds, REDISPATCH_SECONDS))
    stalled, waiting_turns, queued_threads = _left_behind(
        cutoff=cutoff, queued_cutoff=queued_cutoff, redispatch_cutoff=redispatch_cutoff
    )
    held = livestate.leases_held(stalled)
    restarted = [pk for pk in stalled if pk not in held]
    if restarted:
        Message.objects.filter(pk__in=restarted).update(dispatched_at=timezone.now())
    for pk in restarted:
        enqueue_reply(pk)
    for turn_id in waiting_turns:
        orchestration.turn_advance(turn_id=turn_id)
    # A queue whose turn settled while no worker could advance it (a crash in between).
    for thread_id in queued_threads:
        orchestration.queue_next(thread_id=thread_id)
    return restarted


def _left_behind(*, cutoff, queued_cutoff, redispatch_cutoff) -> tuple[list, set, set]:
    """The look's three reads in one query: replies in flight whose task may be lost, turns
    whose next stage never started, threads with a queue. It runs every second whether or
    not anything streams, so it is plain SQL: the ORM's building of three querysets was most
    of an idle worker's CPU."""
    message = Message._meta.db_table
    queued = QueuedMessage._meta.db_table
    sql = f"""
        SELECT 's', id FROM {message}
        WHERE dispatched_at IS NOT NULL AND updated_at < %s
          AND ((status = %s AND dispatched_at < %s) OR (status = %s AND dispatched_at < %s))
        UNION ALL
        SELECT DISTINCT 't', turn_id FROM {message}
        WHERE status = %s AND dispatched_at IS NULL AND turn_id IS NOT NULL
        UNION ALL
        SELECT DISTINCT 'q', thread_id FROM {queued}
    """  # noqa: S608 (table names from the models, values as parameters)
    adapt = connection.ops.adapt_datetimefield_value
    params = [
        adapt(cutoff), MessageStatus.STREAMING.value, adapt(redispatch_cutoff),
        MessageStatus.QUEUED.value, adapt(queued_cutoff), MessageStatus.QUEUED.value,
    ]  # fmt: skip
    stalled: list[int] = []
    turns: set[int] = set()
    threads: set[int] = set()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for kind, pk in cursor.fetchall():
            {"s": stalled.append, "t": turns.add, "q": threads.add}[kind](pk)
    return sorted(stalled), turns, threads


def replies_hand_over(*, replies: dict[int, tuple[str, list[dict]]]) -> int:
    """A stopping worker gives its streaming replies back (a deploy's SIGTERM), message pk ->
    (the text its tabs were shown, the reply's log): each waits again with that text, and its
    task goes to the other workers, whose run continues from it — no lease to wait out, no
    word lost or repeated. The run that stopped is not counted against a reply's attempts.
    One transaction for them all: on SQLite one hold of the writer's lock, not one each."""
    with transaction.atomic():
        handed = [
            Message(pk=message_pk)
            for message_pk, (text, log) in replies.items()
            if Message.objects.filter(pk=message_pk, status=MessageStatus.STREAMING).update(
                status=MessageStatus.QUEUED,
                content=[{"type": "text", "text": storable(text)}] if text else [],
                attempt=Greatest(F("attempt") - 1, 0),
                log=log,
            )
        ]
        dispatch(handed)
    return len(handed)


def reply_settle(*, message_id: int, **final: Any) -> tuple[Message, dict]:
    """Store a reply's final state in one transaction; the settled bubble's push, rendered
    after the commit (its `seq` is the caller's to set). What the reply lets go on is
    `reply_settled_next`, once the tabs have the bubble."""
    with transaction.atomic():
        message = message_finish(message_id=message_id, **final)
    return message, events.state_event(message=message, seq=0)


def reply_settled_next(*, turn_id: int) -> None:
    """What a settled reply lets go on — its turn's next stage, or once the turn has settled
    the thread's next queued message — in one transaction (on SQLite one hold of the writer's
    lock). It runs after the settled bubble is out: the tabs do not wait for it (it was half
    of a reply's last step), and a worker that dies in between leaves a turn the recovery
    look advances."""
    with transaction.atomic():
        orchestration.turn_advance(turn_id=turn_id)
