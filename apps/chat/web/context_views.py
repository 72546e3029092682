"""Thin views for a session's versioned persona and memory: their history with what each
version changed, restoring one, and a thread taking the latest."""

from __future__ import annotations

import difflib
import uuid

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.chat.access import Need
from apps.chat.models import ContextKind, ContextVersion
from apps.chat.records import context
from apps.chat.selectors import threads_for_user
from apps.chat.web.lookup import session_for, thread_for

HISTORY_LENGTH = 100


def _kind(kind: str) -> str:
    if kind not in ContextKind.values:
        raise Http404("Only a persona or a memory has versions.")
    return kind


def _from_thread(request, source):
    """The thread the history was opened from (it takes a restored version), if it is the
    person's own."""
    try:
        public_id = uuid.UUID(source.get("thread", ""))
    except ValueError:
        return None
    return threads_for_user(user=request.user, need=Need.OWN).filter(public_id=public_id).first()


def changes(before: str, after: str) -> list[tuple[str, str]]:
    """The lines a version added ("+") and removed ("-"), with a little context (" ")."""
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=1)
    return [
        (line[0], line[1:])
        for line in lines
        if line[:1] in "+- " and not line.startswith(("+++", "---"))
    ]


@require_GET
def context_history(request, session, kind):
    session = session_for(request, session, Need.OWN)
    kind = _kind(kind)
    versions = list(
        ContextVersion.objects.filter(session=session, kind=kind)
        .select_related("author")
        .order_by("-number")[: HISTORY_LENGTH + 1]
    )
    rows = [
        {
            "version": version,
            "changes": changes(older.text, version.text) if older else [],
            "renamed": older is not None and older.name != version.name,
            "previous": older,
        }
        for version, older in zip(versions, [*versions[1:], None], strict=True)
    ][:HISTORY_LENGTH]
    thread = _from_thread(request, request.GET)
    return render(
        request,
        "chat/context_history.html",
        {
            "session": session,
            "kind": kind,
            "kind_label": ContextKind(kind).label,
            "rows": rows,
            "thread": thread,
        },
    )


@require_POST
def context_restore(request, session, kind, number):
    session = session_for(request, session, Need.OWN)
    kind = _kind(kind)
    thread = _from_thread(request, request.POST)
    try:
        context.context_restore(
            session=session, kind=kind, number=number, author=request.user, thread=thread
        )
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=409, content_type="text/plain")
    url = reverse("chat:context_history", kwargs={"session": session.public_id, "kind": kind})
    return redirect(f"{url}?thread={thread.public_id}" if thread else url)


@require_POST
def thread_use_latest(request, thread):
    """The thread's roles are told the session's current persona and memory from now on."""
    thread = thread_for(request, thread, Need.OWN)
    context.thread_snapshot(thread=thread)
    url = reverse("chat:thread_detail", kwargs={"thread": thread.public_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
