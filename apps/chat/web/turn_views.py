"""Thin views for a turn's extras: the queue (Send now, edit, cancel), Continue, new chat."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.chat.access import Need
from apps.chat.council import orchestration, posting, replies
from apps.chat.records import threads
from apps.chat.records.text import validate_message_text
from apps.chat.web.lookup import message_for, own_message_for, queued_for


def _back_to(request, thread, status: int = 204) -> HttpResponse:
    if not request.htmx:
        return redirect("chat:thread_detail", thread=thread.public_id)
    return HttpResponse(status=status)


@require_POST
def queued_send_now(request, queued):
    """Stop the running turn (its partial text is kept) and send this queued message."""
    queued = queued_for(request, queued)
    try:
        replies.queued_send_now(queued=queued, by=request.user)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=409)
    return _back_to(request, queued.thread)


@require_POST
def queued_edit(request, queued):
    queued = queued_for(request, queued, mine=True)
    try:
        text = validate_message_text(request.POST.get("text", ""))
        orchestration.queued_edit(queued=queued, text=text)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=422)
    return _back_to(request, queued.thread)


@require_POST
def queued_cancel(request, queued):
    """Drop a queued message."""
    queued = queued_for(request, queued, mine=True)
    try:
        orchestration.queued_cancel(queued=queued)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=409)
    return _back_to(request, queued.thread)


@require_POST
def message_continue(request, message):
    """A reply cut off at the length limit goes on from its last word."""
    message = message_for(request, message, Need.TALK)
    try:
        replies.reply_continue(message=message, by=request.user)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=409)
    return _back_to(request, message.thread)


@require_POST
def message_unroute(request, message):
    """Undo an auto-route: the message goes to the role it was going to instead."""
    message = message_for(request, message, Need.TALK)
    try:
        posting.route_undo(message=message, author=request.user)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=409)
    return _back_to(request, message.thread)


@require_POST
def message_new_chat(request, message):
    """A message that looked like a new topic starts a new chat of the session, there."""
    message = message_for(request, message, Need.TALK)
    if not message.is_user:
        return HttpResponse("Only your own messages can start a new chat.", status=400)
    message = own_message_for(request, message.public_id)
    try:
        with transaction.atomic():  # a refused post leaves no empty thread behind
            thread = threads.thread_create(session=message.thread.session)
            posting.message_post(thread=thread, author=request.user, text=message.text)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=422)
    url = reverse("chat:thread_detail", kwargs={"thread": thread.public_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
