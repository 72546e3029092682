"""The rows a view works on, found for the requesting person and what the view needs of them
(see `access`): 404 for what they cannot read, 403 with the reason for what they can read but
not change."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from apps.chat.access import Need, reach
from apps.chat.models import Message, QueuedMessage, Session, Thread
from apps.chat.selectors import (
    messages_for_user,
    queued_for_user,
    sessions_for_user,
    threads_for_user,
)


def session_for(request, public_id, need: Need) -> Session:
    return reach(sessions_for_user, user=request.user, need=need, public_id=public_id)


def thread_for(request, public_id, need: Need) -> Thread:
    return reach(threads_for_user, user=request.user, need=need, public_id=public_id)


def message_for(request, public_id, need: Need) -> Message:
    return reach(messages_for_user, user=request.user, need=need, public_id=public_id)


def own_message_for(request, public_id) -> Message:
    """A message the requesting person wrote (the owner also: messages from before rooms
    have no author), for what only its author may do: edit it, start a chat with it."""
    message = message_for(request, public_id, Need.TALK)
    owner = message.thread.session.owner_id == request.user.pk
    if message.author_id != request.user.pk and not (owner and message.author_id is None):
        raise PermissionDenied("Only its author can do that with a message.")
    return message


def queued_for(request, public_id, *, mine: bool = False) -> QueuedMessage:
    """A queued message of a thread the person may talk in; `mine`: only its author or the
    room's owner may change it (Send now is anyone's who talks)."""
    queued = reach(queued_for_user, user=request.user, need=Need.TALK, public_id=public_id)
    if mine and request.user.pk not in (queued.author_id, queued.thread.session.owner_id):
        raise PermissionDenied("Only its author or the room's owner can change a queued message.")
    return queued
