"""A person's message enters the council: routed, saved, and its replies queued."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.chat.council import orchestration
from apps.chat.council.commands import is_command, run_command
from apps.chat.council.posted import PostedMessage
from apps.chat.display import events
from apps.chat.models import (
    USER_SPEAKER,
    Message,
    MessageStatus,
    Session,
    SessionRole,
    Stage,
    Thread,
    Turn,
)
from apps.chat.records.messages import allocate_seqs, notice_create
from apps.chat.records.replies import reply_placeholder
from apps.chat.records.text import validate_message_text
from apps.chat.records.threads import thread_autoname, thread_branch
from apps.chat.selectors import session_links, transcript_messages
from apps.roles.routing import RosterRole, Route, route_message
from apps.roles.selectors import group_members


def _route(*, session: Session, links: list[SessionRole], text: str) -> Route:
    roster = [
        RosterRole(
            handle=link.role.handle,
            is_default=link.role.is_default,
            answers_last=link.role.answers_last,
            muted=link.muted,
        )
        for link in links
    ]
    return route_message(
        text,
        roles=roster,
        groups=group_members(),
        mode=session.addressing_mode,
        sticky=session.sticky_handle,
    )


def _routing_notices(route: Route, links: list[SessionRole]) -> list[str]:
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


def message_post(
    *, thread: Thread, author, text: str, client_token: uuid.UUID | None = None
) -> PostedMessage:
    """Save a user's message, route it and queue one reply per target.

    Slash commands are run instead of posted. The replies are published and enqueued when the
    transaction commits; the answers-last roles wait for the others (see `orchestration`).
    A `client_token` already used in this thread (the same form sent twice) posts nothing
    and returns the message it posted the first time.
    """
    text = validate_message_text(text)
    if is_command(text):
        return run_command(thread=thread, author=author, text=text)
    if client_token is not None:
        earlier = _posted_with(thread, client_token)
        if earlier is not None:
            return earlier
    try:
        return _post(thread=thread, author=author, text=text, client_token=client_token)
    except IntegrityError:
        earlier = _posted_with(thread, client_token) if client_token else None
        if earlier is None:
            raise
        return earlier  # the same form, sent twice at once: the other request posted it


def _posted_with(thread: Thread, client_token: uuid.UUID) -> PostedMessage | None:
    message = Message.objects.filter(thread=thread, client_token=client_token).first()
    if message is None:
        return None
    replies = list(Message.objects.filter(turn__user_message=message).order_by("seq"))
    return PostedMessage(user_message=message, replies=replies)


def _post(*, thread: Thread, author, text: str, client_token: uuid.UUID | None) -> PostedMessage:
    text = text.removeprefix("/") if text.startswith("//") else text
    session = Session.objects.select_related("credential").get(pk=thread.session_id)
    links = session_links(session=session)
    route = _route(session=session, links=links, text=text)
    notices = _routing_notices(route, links)
    if not route.targets:
        raise ValidationError(
            " ".join(notices) or "This session has no roles to answer; add one in its settings.",
            code="no_target",
        )
    roles = {link.role.handle: link.role for link in links}
    with transaction.atomic():
        orchestration.turns_stop_rounds(thread=thread)
        seqs = iter(allocate_seqs(thread, 1 + len(notices) + len(route.targets)))
        user_message = Message.objects.create(
            thread=thread,
            seq=next(seqs),
            speaker=USER_SPEAKER,
            author=author,
            content=[{"type": "text", "text": text}],
            status=MessageStatus.DONE,
            client_token=client_token,
        )
        notice_messages = [
            notice_create(thread=thread, text=notice, seq=next(seqs)) for notice in notices
        ]
        turn = Turn.objects.create(
            thread=thread, user_message=user_message, auto_rounds=session.auto_rounds
        )
        replies = [
            reply_placeholder(
                thread=thread,
                session=session,
                role=roles[handle],
                seq=next(seqs),
                turn=turn,
                stage=Stage.LAST if handle in route.last else Stage.PARALLEL,
            )
            for handle in route.targets
        ]
        Session.objects.filter(pk=session.pk).update(
            updated_at=timezone.now(), sticky_handle=route.sticky
        )
        if route.sticky != session.sticky_handle:  # other tabs show the new sticky role
            events.publish_session_controls_on_commit(session=session)
        events.publish_messages_added_on_commit(
            thread=thread, messages=[user_message, *notice_messages, *replies]
        )
        if not thread.label:
            thread_autoname(thread=thread, text=text)
        stagger = settings.PARLEY_STAGGER_FANOUT and all(
            reply.provider == "anthropic" for reply in replies
        )
        orchestration.first_dispatch(replies=replies, stagger=stagger)
    return PostedMessage(user_message=user_message, replies=replies, notices=notice_messages)


def message_edit(*, message: Message, author, text: str) -> PostedMessage:
    """Send an edited version of a user message: a branch from just before it, then the text."""
    if not message.is_user:
        raise ValidationError("Only your own messages can be edited.")
    text = validate_message_text(text)
    before = transcript_messages(thread=message.thread, before_seq=message.seq)
    branch = thread_branch(thread=message.thread, message=before[-1] if before else None)
    posted = message_post(thread=branch, author=author, text=text)
    return PostedMessage(
        user_message=posted.user_message,
        replies=posted.replies,
        notices=posted.notices,
        redirect_to=posted.redirect_to or branch,
    )
