"""A person's message enters the council: routed, saved, and its replies queued."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from apps.chat.council import orchestration, replies
from apps.chat.council.commands import is_command, run_command
from apps.chat.council.posted import PostedMessage
from apps.chat.council.room_rules import Whisper, is_whisper, whisper_parse
from apps.chat.display import events
from apps.chat.models import Attachment, Message, QueuedMessage, Thread
from apps.chat.records.attachments import attachments_queue, attachments_send
from apps.chat.records.budgets import budget_check
from apps.chat.records.text import validate_message_text
from apps.chat.records.threads import thread_branch
from apps.chat.selectors import transcript_messages


def message_post(
    *,
    thread: Thread,
    author,
    text: str,
    client_token: uuid.UUID | None = None,
    attachments: list[Attachment] | None = None,
) -> PostedMessage:
    """Save a user's message, route it and queue one reply per target — or, while the thread's
    turn still runs, keep it queued until that turn has settled (see `orchestration`).

    Slash commands are run instead of posted. The replies are published and enqueued when the
    transaction commits; the answers-last roles wait for the others.
    A `client_token` already used in this thread (the same form sent twice) posts nothing
    and returns the message it posted the first time. `attachments` (waiting in the author's
    composer) go with the message, or with it into the queue; with them the text may be empty.
    """
    attachments = attachments or []
    text = validate_message_text(text) if text.strip() or not attachments else ""
    whisper = None
    if is_whisper(text):
        whisper = whisper_parse(session=thread.session, author=author, text=text)
    elif is_command(text):
        return run_command(thread=thread, author=author, text=text)
    if client_token is not None:
        earlier = _posted_with(thread, client_token)
        if earlier is not None:
            return earlier
    budget_check(session=thread.session, person=author)  # early; reserved when it starts
    try:
        with transaction.atomic():  # bound before the commit that dispatches the replies
            posted = _post(
                thread=thread, author=author, text=text, client_token=client_token,
                whisper=whisper,
            )  # fmt: skip
            if posted.user_message is not None and attachments:
                attachments_send(message=posted.user_message, attachments=attachments)
            elif posted.queued is not None and attachments:
                attachments_queue(queued=posted.queued, attachments=attachments)
            return posted
    except IntegrityError:
        earlier = _posted_with(thread, client_token) if client_token else None
        if earlier is None:
            raise
        return earlier  # the same form, sent twice at once: the other request posted it


def _posted_with(thread: Thread, client_token: uuid.UUID) -> PostedMessage | None:
    message = Message.objects.filter(thread=thread, client_token=client_token).first()
    if message is None:
        queued = QueuedMessage.objects.filter(thread=thread, client_token=client_token).first()
        return PostedMessage(user_message=None, replies=[], queued=queued) if queued else None
    replies = list(Message.objects.filter(turn__user_message=message).order_by("seq"))
    return PostedMessage(user_message=message, replies=replies)


def _post(
    *, thread: Thread, author, text: str, client_token: uuid.UUID | None, whisper: Whisper | None
) -> PostedMessage:
    text = text.removeprefix("/") if text.startswith("//") else text
    return orchestration.message_enter(
        thread=thread, author=author, text=text, client_token=client_token, whisper=whisper
    )


def route_undo(*, message: Message, author) -> PostedMessage:
    """Undo an auto-route: stop what the role it went to is saying and send the same text to
    the role it was going to, by name."""
    routed = message.routed or {}
    if not message.is_user or not routed.get("to") or routed.get("undone") or message.private:
        raise ValidationError("This message was not handed to another role.")
    replies.thread_interrupt(thread=message.thread, by=author)
    Message.objects.filter(pk=message.pk).update(routed={**routed, "undone": True})
    message.routed = {**routed, "undone": True}
    events.publish_message_replaced_on_commit(message=message, seq=events.SETTLED_SEQ)
    return message_post(
        thread=message.thread, author=author, text=f"@{routed['from']} {message.text}"
    )


def message_edit(*, message: Message, author, text: str) -> PostedMessage:
    """Send an edited version of a user message: a branch from just before it, then the text."""
    if not message.is_user:
        raise ValidationError("Only your own messages can be edited.")
    text = validate_message_text(text)
    before = transcript_messages(thread=message.thread, before_seq=message.seq)
    with transaction.atomic():  # a refused post leaves no empty branch behind
        branch = thread_branch(thread=message.thread, message=before[-1] if before else None)
        posted = message_post(thread=branch, author=author, text=text)
    return PostedMessage(
        user_message=posted.user_message,
        replies=posted.replies,
        notices=posted.notices,
        redirect_to=posted.redirect_to or branch,
    )
