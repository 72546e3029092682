"""When each reply of a turn runs: its stages, its auto-rounds, and the thread's queue.

Every reply is a placeholder message created up front (auto-rounds: the running one and the
next, shown as waiting) and a Celery task enqueued when its stage may start. Workers call
`turn_advance` after settling a reply; it holds the turn's row lock, so two replies finishing
together dispatch the next stage once. Nothing here waits: a failed reply settles like any
other, so it never blocks the rest. When a turn has settled, the thread's next queued message
(sent while it ran) becomes the next turn.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.chat.council import rounds, topics
from apps.chat.council.dispatch import dispatch
from apps.chat.council.posted import PostedMessage
from apps.chat.council.room_rules import Whisper, whisper_parse
from apps.chat.council.turn_routing import (
    reply_order,
    route_or_refuse,
    routing_notices,
    turn_route,
)
from apps.chat.display import events
from apps.chat.models import (
    IN_FLIGHT,
    USER_SPEAKER,
    Attachment,
    Message,
    MessageStatus,
    QueuedMessage,
    Session,
    SessionRole,
    Stage,
    Thread,
    Turn,
)
from apps.chat.records.attachments import attachments_send
from apps.chat.records.budgets import budget_reserve
from apps.chat.records.messages import allocate_seqs, notice_create
from apps.chat.records.replies import reply_placeholder
from apps.chat.records.threads import thread_autoname, thread_autoname_from_replies
from apps.chat.selectors import session_links
from apps.roles.routing import Route

logger = logging.getLogger(__name__)
SESSION_TOUCH_EVERY = timedelta(minutes=1)


def message_enter(
    *,
    thread: Thread,
    author,
    text: str,
    client_token: uuid.UUID | None,
    reply_length: str = "",
    whisper: Whisper | None = None,
) -> PostedMessage:
    """A message starts its turn now, or waits in the thread's queue while another turn (or
    an earlier queued message) is still to finish, so its replies see everything before."""
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread.pk)
        waiting = QueuedMessage.objects.filter(thread=thread, held_because="").exists()
        if thread_busy(thread_id=thread.pk) or waiting:
            queued = message_queue(
                thread=thread, author=author, text=text, client_token=client_token,
                reply_length=reply_length, whisper=whisper,
            )  # fmt: skip
            return PostedMessage(user_message=None, replies=[], queued=queued)
        return turn_start(
            thread=thread, author=author, text=text, client_token=client_token,
            reply_length=reply_length, whisper=whisper,
        )  # fmt: skip


def thread_busy(*, thread_id: int) -> bool:
    """A reply of the thread is waiting or streaming (its turn, a retry, a regenerate)."""
    return Message.objects.filter(thread_id=thread_id, status__in=IN_FLIGHT).exists()


@dataclass(frozen=True)
class _TurnRows:
    user_message: Message
    notices: list[Message]
    turn: Turn
    replies: list[Message]


def turn_start(
    *,
    thread: Thread,
    author,
    text: str,
    client_token: uuid.UUID | None = None,
    reply_length: str = "",
    whisper: Whisper | None = None,
) -> PostedMessage:
    """Save the person's message and start its turn: one waiting reply per addressed role.
    A whisper's turn is answered by the roles it names (none: a note between people), and
    its message and replies are seen by its audience alone.

    Call it inside a transaction holding the thread's row lock. The replies are published and
    enqueued on commit; the answers-last roles wait for the others.
    """
    session = Session.objects.select_related("credential").get(pk=thread.session_id)
    links = session_links(session=session)
    if whisper is not None and not whisper.roles:
        return _note_between_people(thread=thread, author=author, whisper=whisper,
                                    client_token=client_token)  # fmt: skip
    text = whisper.text if whisper is not None else text
    route, routed = turn_route(thread=thread, session=session, links=links, text=text,
                                whisper=whisper)  # fmt: skip
    targets, sequential = reply_order(session=session, route=route)
    # Before anything is saved: a member past their daily budget starts nothing.
    budget_day = budget_reserve(session=session, person=author, replies=len(targets))
    rows = _turn_rows(
        thread=thread, session=session, links=links, author=author, text=text,
        client_token=client_token, reply_length=reply_length, whisper=whisper, route=route,
        routed=routed, targets=targets, sequential=sequential, budget_day=budget_day,
    )  # fmt: skip
    if whisper is not None:
        _make_private([rows.user_message, *rows.replies], whisper)
    _announce_turn(thread=thread, session=session, links=links, rows=rows, route=route,
                   whisper=whisper, text=text)  # fmt: skip
    stagger = settings.PARLEY_STAGGER_FANOUT and all(
        reply.provider == "anthropic" for reply in rows.replies
    )
    first_dispatch(replies=rows.replies, stagger=stagger, sequential=sequential)
    return PostedMessage(
        user_message=rows.user_message, replies=rows.replies, notices=rows.notices,
        session=session, links=links,
    )  # fmt: skip


def _turn_rows(
    *, thread: Thread, session: Session, links: list[SessionRole], author, text: str,
    client_token: uuid.UUID | None, reply_length: str, whisper: Whisper | None, route: Route,
    routed: dict, targets: list[str], sequential: bool, budget_day,
) -> _TurnRows:  # fmt: skip
    """The turn's rows, numbered in one go: the person's message, the routing notices, the
    turn, and one waiting reply per role."""
    notices = routing_notices(route, links)
    links_by_handle = {link.role.handle: link for link in links}
    seqs = iter(allocate_seqs(thread, 1 + len(notices) + len(targets)))
    user_message = Message.objects.create(
        thread=thread,
        seq=next(seqs),
        speaker=USER_SPEAKER,
        author=author,
        content=[{"type": "text", "text": text}],
        status=MessageStatus.DONE,
        client_token=client_token,
        topic=topics.topic_of(thread=thread, text=text),
        routed=routed,
    )
    notice_messages = [
        notice_create(thread=thread, text=notice, seq=next(seqs)) for notice in notices
    ]
    turn = Turn.objects.create(
        thread=thread,
        user_message=user_message,
        auto_rounds=session.auto_rounds
        if whisper is None and (route.fan_out or session.ai_mentions)
        else 0,
        mentions_only=not route.fan_out,
        sequential=sequential,
        reply_length=reply_length,
    )
    replies = [
        reply_placeholder(
            thread=thread,
            session=session,
            role=links_by_handle[handle].role,
            seq=next(seqs),
            turn=turn,
            stage=Stage.LAST if handle in route.last else Stage.PARALLEL,
            link=links_by_handle[handle],
            budget_day=budget_day,
        )
        for handle in targets
    ]
    return _TurnRows(user_message, notice_messages, turn, replies)


def _announce_turn(
    *, thread: Thread, session: Session, links: list[SessionRole], rows: _TurnRows,
    route: Route, whisper: Whisper | None, text: str,
) -> None:  # fmt: skip
    """What the open tabs and the sessions list learn on commit: the new bubbles (a whisper's
    to its audience only), the sticky role, the session's place in the list, the thread's
    name."""
    roles = {link.role.handle: link.role for link in links}
    status_changed = bool(rows.turn.auto_rounds)  # a rounds line may show while they run
    if whisper is None and route.sticky != thread.sticky_handle:
        Thread.objects.filter(pk=thread.pk).update(sticky_handle=route.sticky)
        thread.sticky_handle = route.sticky
        status_changed = True
    # The sessions list orders by it, to the minute: a row every thread of the session shares,
    # so a burst of posts does not queue on its lock (PostgreSQL) nor write it once each.
    now = timezone.now()
    Session.objects.filter(pk=session.pk, updated_at__lt=now - SESSION_TOUCH_EVERY).update(
        updated_at=now
    )
    if whisper is None:
        added = [rows.user_message, *rows.notices, *rows.replies]
        events.publish_messages_added_on_commit(thread=thread, messages=added, roles=roles)
    else:  # the notices are for everyone, the whisper for its audience
        whispered = [rows.user_message, *rows.replies]
        events.publish_messages_added_on_commit(thread=thread, messages=whispered, roles=roles)
        if rows.notices:
            events.publish_messages_added_on_commit(thread=thread, messages=rows.notices)
    events.publish_posted_on_commit(message=rows.user_message)
    if status_changed:
        events.publish_thread_status_on_commit(thread=thread)
    # After the commit (it locks the session's row to pick a free name); a whisper never
    # names a thread everyone sees.
    if not thread.label and whisper is None:
        transaction.on_commit(lambda: thread_autoname(thread=thread, text=text), robust=True)


def _make_private(messages: list[Message], whisper: Whisper) -> None:
    """A whisper's message and replies: seen by its audience alone."""
    Message.objects.filter(pk__in=[m.pk for m in messages]).update(
        private=True, audience_roles=whisper.roles
    )
    Audience = Message.audience.through
    Audience.objects.bulk_create(
        Audience(message_id=message.pk, user_id=person_id)
        for message in messages
        for person_id in whisper.people_ids
    )
    for message in messages:
        message.private, message.audience_roles = True, whisper.roles


def _note_between_people(
    *, thread: Thread, author, whisper: Whisper, client_token: uuid.UUID | None
) -> PostedMessage:
    """A whisper to people only: their message, no turn, no reply."""
    (seq,) = allocate_seqs(thread, 1)
    message = Message.objects.create(
        thread=thread, seq=seq, speaker=USER_SPEAKER, author=author, status=MessageStatus.DONE,
        content=[{"type": "text", "text": whisper.text}], client_token=client_token,
    )  # fmt: skip
    _make_private([message], whisper)
    events.publish_messages_added_on_commit(thread=thread, messages=[message])
    events.publish_posted_on_commit(message=message)
    return PostedMessage(user_message=message, replies=[])


def first_dispatch(*, replies: list[Message], stagger: bool, sequential: bool = False) -> None:
    """Start a new turn: its parallel stage, or its last stage when nobody else answers.

    With `stagger`, one parallel reply starts first and the others when its response has
    begun (`turn_release`), so they read the prompt-cache entry it writes. A sequential turn
    starts its first reply only.
    """
    parallel = [m for m in replies if m.stage == Stage.PARALLEL]
    stage = parallel or [m for m in replies if m.stage == Stage.LAST]
    dispatch(stage[:1] if sequential or (stagger and len(parallel) > 1) else stage)


def locked_turn(turn_id: int) -> Turn | None:
    """The turn, row-locked. A transaction that changes one of a turn's replies takes this
    first, as the settle's next step (`turn_advance`) does: the two then wait for each other
    in one order. (On PostgreSQL the other order deadlocks: a reply updated twice in one
    transaction has its keys checked at commit, its thread's and then its turn's, while the
    settle holds the turn and waits to lock the thread.)"""
    return Turn.objects.select_for_update().filter(pk=turn_id).first()


def turn_release(*, message_id: int) -> None:
    """A staggered reply's response has begun: start the rest of its stage."""
    held = Message.objects.filter(pk=message_id).values("turn_id", "stage").first()
    if held is None or held["turn_id"] is None:
        return
    if not Message.objects.filter(
        turn_id=held["turn_id"], stage=held["stage"], status=MessageStatus.QUEUED,
        dispatched_at__isnull=True,
    ).exists():  # fmt: skip
        return  # nothing waits on it: no write transaction (on SQLite, no writer lock)
    with transaction.atomic():
        message = Message.objects.get(pk=message_id)
        if message.turn_id is None:
            return
        turn = locked_turn(message.turn_id)
        if turn is None or turn.sequential or message.stage == Stage.AUTO_ROUND:
            return
        waiting = Message.objects.filter(
            turn_id=message.turn_id,
            stage=message.stage,
            status=MessageStatus.QUEUED,
            dispatched_at__isnull=True,
        ).order_by("seq")
        dispatch(list(waiting))


def turn_advance(*, turn_id: int) -> list[Message]:
    """Start whatever may run now that one of the turn's replies has settled; once the whole
    turn has, the thread's next queued message."""
    with transaction.atomic():
        turn = locked_turn(turn_id)
        if turn is None:
            return []
        started = _advance_locked(turn)
    if not started:
        queue_next(thread_id=turn.thread_id)
    return started


def _advance_locked(turn: Turn) -> list[Message]:
    replies = list(turn.messages.order_by("seq"))
    waiting = [m for m in replies if m.status == MessageStatus.QUEUED and not m.dispatched_at]
    running = [m for m in replies if m.status in IN_FLIGHT and m.dispatched_at]
    staged = [m for m in waiting if m.stage != Stage.AUTO_ROUND]
    if staged:
        stage = min(m.stage for m in staged)
        if any(m.stage < stage or turn.sequential for m in running):
            return []
        ready = [m for m in staged if m.stage == stage]
        ready = ready[:1] if turn.sequential else ready
        dispatch(ready)
        if turn.sequential:
            events.publish_thread_status_on_commit(thread=turn.thread)
        return ready
    if running:
        return []
    return rounds.next_auto_reply(turn, replies)


def turns_stop_rounds(*, thread: Thread) -> None:
    """No further auto-round starts in this thread (an interrupt); the next member's waiting
    bubble goes away."""
    stopped = Turn.objects.filter(thread=thread, rounds_stopped=False).update(rounds_stopped=True)
    rounds.remove_waiting_auto(thread=thread)
    if stopped:
        events.publish_thread_status_on_commit(thread=thread)


# The queue: messages sent while a turn runs.


def message_queue(
    *,
    thread: Thread,
    author,
    text: str,
    client_token: uuid.UUID | None,
    reply_length: str = "",
    whisper: Whisper | None = None,
) -> QueuedMessage:
    """Keep a message for when the thread's running turn has settled (checked for a target
    now, so a message nobody would answer is refused at once; a whisper was checked when it
    was read, and the queue shows it without its text)."""
    session = Session.objects.get(pk=thread.session_id)
    if whisper is None:
        route_or_refuse(thread=thread, session=session, text=text)
    queued = QueuedMessage.objects.create(
        thread=thread,
        author=author,
        text=text,
        client_token=client_token,
        reply_length=reply_length,
        private=whisper is not None,
    )
    events.publish_thread_status_on_commit(thread=thread)
    return queued


def queue_next(*, thread_id: int) -> PostedMessage | None:
    """Post the thread's next queued message as a new turn, if nothing runs there now.

    A queued message that can no longer be answered (its roles were removed) becomes a notice
    saying so, with its text, and the next one is tried.
    """
    while True:
        with transaction.atomic():
            thread = Thread.objects.select_for_update().filter(pk=thread_id).first()
            if thread is None or thread_busy(thread_id=thread_id):
                return None
            queued = QueuedMessage.objects.filter(thread=thread, held_because="").first()
            if queued is None:
                thread_autoname_from_replies(thread=thread)  # the turn has settled
                events.publish_turn_finished_on_commit(thread=thread)
                return None
            attachments = list(Attachment.objects.filter(queued=queued).order_by("position", "pk"))
            queued.delete()
            events.publish_thread_status_on_commit(thread=thread)
            try:
                with transaction.atomic():
                    whisper = None
                    if queued.private:
                        whisper = whisper_parse(
                            session=thread.session, author=queued.author, text=queued.text
                        )
                    posted = turn_start(
                        thread=thread,
                        author=queued.author,
                        text=queued.text,
                        client_token=queued.client_token,
                        reply_length=queued.reply_length,
                        whisper=whisper,
                    )
                    if posted.user_message is not None and attachments:
                        attachments_send(message=posted.user_message, attachments=attachments)
                    return posted
            except ValidationError as exc:
                quoted = "" if queued.private else f"\n\n> {queued.text[:2000]}"
                notice = notice_create(
                    thread=thread,
                    text=f"A queued message could not be sent: {' '.join(exc.messages)}{quoted}",
                )
                events.publish_messages_added_on_commit(thread=thread, messages=[notice])


def queued_edit(*, queued: QueuedMessage, text: str) -> QueuedMessage:
    session = Session.objects.get(pk=queued.thread.session_id)
    route_or_refuse(thread=queued.thread, session=session, text=text)
    with transaction.atomic():
        if not QueuedMessage.objects.filter(pk=queued.pk).update(text=text):
            raise ValidationError("That message has already been sent.", code="gone")
        queued.text = text
        events.publish_thread_status_on_commit(thread=queued.thread)
    return queued


def queued_cancel(*, queued: QueuedMessage) -> str:
    """Drop a queued message; its text is returned for the composer."""
    with transaction.atomic():
        deleted, _ = QueuedMessage.objects.filter(pk=queued.pk).delete()
        if not deleted:
            raise ValidationError("That message has already been sent.", code="gone")
        events.publish_thread_status_on_commit(thread=queued.thread)
    return queued.text


def queued_jump(*, queued: QueuedMessage) -> bool:
    """Put a queued message first (Send now); False when it has already been sent."""
    with transaction.atomic():
        QueuedMessage.objects.filter(thread_id=queued.thread_id).update(send_now=False)
        return bool(QueuedMessage.objects.filter(pk=queued.pk).update(send_now=True))
