"""Thin views: validate, call one service or selector, render a page or a partial."""

from __future__ import annotations

import uuid
from dataclasses import replace

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.accounts.personas import personas_for_user
from apps.attachments.headers import content_disposition
from apps.chat.access import Need, rooms_for_user, visible_to
from apps.chat.council import digests, lifecycle, posting, replies
from apps.chat.council.commands import command_list
from apps.chat.display.bubbles import (
    render_bubbles,
    render_session_controls,
    render_thread_status,
    session_controls_context,
    shown_text,
    thread_status_context,
    thread_usage_context,
)
from apps.chat.display.exports import export_html, export_json, export_markdown
from apps.chat.display.rooms import digest_context
from apps.chat.models import Session
from apps.chat.reading import with_unread_sessions
from apps.chat.records import sessions, threads
from apps.chat.records.context import stale_context
from apps.chat.search import search_session, search_sessions
from apps.chat.selectors import (
    attachments_waiting,
    messages_for_user,
    roles_reading_descriptions,
    session_links,
    sessions_for_user,
    thread_in_flight_for_session,
    thread_tree,
    threads_for_user,
    transcript_after,
    transcript_page,
    transcript_page_around,
)
from apps.chat.usage import session_and_thread_usage, threads_figures
from apps.chat.web.forms import (
    MessageForm,
    SessionCreateForm,
    SessionSettingsForm,
)
from apps.chat.web.lookup import message_for, own_message_for, session_for, thread_for
from apps.chat.web.rooms_views import room_context
from apps.connectors.selectors import servers_for_user
from apps.providers.selectors import credentials_for_user
from apps.roles.selectors import roles_offered


def _create_form(request, data=None) -> SessionCreateForm:
    return SessionCreateForm(
        data,
        roles=roles_offered(request.user),
        credentials=credentials_for_user(user=request.user),
        personas=personas_for_user(user=request.user),
        servers=servers_for_user(user=request.user),
    )


@require_GET
def session_list(request):
    return render(request, "chat/session_list.html", _list_context(request, _create_form(request)))


def _list_context(request, form: SessionCreateForm) -> dict:
    rooms = with_unread_sessions(rooms_for_user(user=request.user), user=request.user)
    return {"sessions": rooms.select_related("active_thread"), "form": form}


@require_POST
def session_create(request):
    """The create dialog: a new session set up as chosen, opened at its first thread; the
    dialog again, with what was typed and why not, when something is wrong."""
    form = _create_form(request, request.POST)
    if not form.is_valid():
        if request.htmx:
            return render(request, "chat/_session_create.html", {"form": form}, status=422)
        return render(request, "chat/session_list.html", _list_context(request, form), status=422)
    data = form.cleaned_data
    session = sessions.session_create(
        owner=request.user,
        name=data["name"],
        credential=data["credential"],
        model=data["model"],
        persona=data["persona"],
        persona_name=data["persona_name"],
        memory=data["memory"],
        roles=data["roles"],
        mcp_servers=list(data.get("mcp_servers") or []),
        disabled_tools=form.disabled_tools(),
    )
    thread = session.active_thread or threads.thread_create(session=session)
    url = reverse("chat:thread_detail", kwargs={"thread": thread.public_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_GET
def session_detail(request, session):
    session = session_for(request, session, Need.READ)
    return _open_active_thread(session)


def _open_active_thread(session):
    """Go to the session's current thread (a session whose threads were all gone gets one)."""
    thread = session.active_thread or threads.thread_create(session=session)
    return redirect("chat:thread_detail", thread=thread.public_id)


@require_POST
def thread_create(request, session):
    session = session_for(request, session, Need.TALK)
    thread = threads.thread_create(session=session)
    url = reverse("chat:thread_detail", kwargs={"thread": thread.public_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
def session_rename(request, session):
    session = session_for(request, session, Need.OWN)
    try:  # the service validates the name
        sessions.session_rename(session=session, name=request.POST.get("name", ""))
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=422)
    return redirect("chat:session_list")


@require_POST
def session_delete(request, session):
    session = session_for(request, session, Need.OWN)
    lifecycle.session_delete(session=session)
    url = reverse("chat:session_list")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _settings_form(request, session, data=None):
    return SessionSettingsForm(
        data,
        session=session,
        credentials=credentials_for_user(user=request.user),
        personas=personas_for_user(user=request.user),
        servers=servers_for_user(user=request.user),
    )


def session_settings(request, session):
    """The settings modal: GET renders it, POST saves; while replies stream, ask how to apply."""
    session = session_for(request, session, Need.OWN)
    if request.method == "GET":
        form = _settings_form(request, session)
        return render(request, "chat/_settings.html", {"session": session, "form": form})
    if request.method != "POST":
        return HttpResponse(status=405)
    raw_thread = request.POST.get("thread", "")
    try:  # the thread the dialog was opened from, checked before anything is saved
        thread_id = uuid.UUID(raw_thread) if raw_thread else None
    except ValueError:
        return HttpResponse("Say which thread the settings were opened from.", status=400)
    form = _settings_form(request, session, request.POST)
    streaming = thread_in_flight_for_session(session=session)
    apply = request.POST.get("apply", "")
    if not form.is_valid() or (streaming and apply not in ("now", "next")):
        context = {"session": session, "form": form, "ask_apply": form.is_valid() and streaming}
        return render(request, "chat/_settings.html", context, status=422)
    thread = None
    if thread_id is not None:
        thread = (
            threads_for_user(user=request.user, need=Need.OWN).filter(public_id=thread_id).first()
        )
    change = replace(form.change(), from_thread=thread)  # it takes a changed persona or memory
    lifecycle.session_apply_settings(session=session, change=change, apply_now=apply == "now")
    context = {**chat_context(session=session, thread=thread), "saved": True}
    response = render(request, "chat/_settings_saved.html", context)
    response["HX-Trigger"] = "parley:settings-saved"
    return response


def chat_context(*, session, thread, usage=None) -> dict:
    """What the composer, the role picker and the summary strip show."""
    return {
        **session_controls_context(session, usage=usage),
        "thread": thread,
        "client_token": uuid.uuid4(),
    }


def composer_context(*, session, thread, links=None) -> dict:
    """What the composer shows (its role picker and addressing line; not the summary strip,
    whose totals cost a query over the whole session, on every message sent). `links`: the
    session's roles, when the caller has read them."""
    links = session_links(session=session) if links is None else links
    return {
        "session": session,
        "links": links,
        "describing": roles_reading_descriptions(session=session, links=links),
        "thread": thread,
        "client_token": uuid.uuid4(),  # a new one per composer: see message_post
    }


@require_GET
def thread_detail(request, thread):
    thread = thread_for(request, thread, Need.READ)
    session = thread.session
    page, later = _opening_page(request, thread)
    seen_before = threads.thread_mark_seen(thread=thread, user=request.user)
    room = room_context(request, session)
    digest = digests.digest_for_return(
        thread=thread, user=request.user, seen_before=seen_before, shared=room["shared"]
    )
    usage, own_usage = session_and_thread_usage(session=session, thread=thread)
    chat = chat_context(session=session, thread=thread, usage=usage)
    roles = {link.role.handle: link.role for link in chat["links"]}
    context = {
        **chat,
        **thread_status_context(thread, empty=thread.next_seq == 1),
        **_page_context(thread, page, roles=roles),
        "tree": thread_tree(session=session, user=request.user),
        **room,
        **digest_context(digest),
        "form": MessageForm(),
        "slash_commands": command_list(),
        **thread_usage_context(own_usage, threads_figures(thread_ids=[thread.pk])[thread.pk]),
        "later": later,
        "stale_context": stale_context(thread=thread, session=session),
        "seen_seq": seen_before,
        "latest_seq": thread.next_seq - 1,
    }
    return render(request, "chat/thread.html", context)


@require_GET
def session_search(request, session):
    """Messages of the session's threads that match the words typed, with where they are."""
    session = session_for(request, session, Need.READ)
    query = request.GET.get("q", "").strip()[:200]
    hits = search_session(session=session, user=request.user, query=query)
    context = {"query": query, "hits": hits, "session": session}
    return render(request, _search_template(request), context)


@require_GET
def search_everywhere(request):
    """Every session of the person's, searched the same way; the hits grouped by session."""
    query = request.GET.get("q", "").strip()[:200]
    rooms = sessions_for_user(user=request.user, need=Need.READ)
    hits = search_sessions(sessions=rooms, user=request.user, query=query)
    context = {"query": query, "hits": hits, "everywhere": True}
    return render(request, _search_template(request), context)


def _search_template(request) -> str:
    """The results for the search box; a page of their own for a link opened or a form sent
    without script."""
    return "chat/_search_results.html" if request.htmx else "chat/search.html"


def _cursor(request, name: str) -> uuid.UUID | None:
    """A message id passed as ?before= or ?after=; None when it is not one."""
    try:
        return uuid.UUID(request.GET.get(name, ""))
    except ValueError:
        return None


@require_GET
def thread_later(request, thread):
    """The messages just after the newest one a page opened at a search hit shows."""
    thread = thread_for(request, thread, Need.READ)
    after_id = _cursor(request, "after")
    if after_id is None:
        return HttpResponse("Say which message to load the later ones after.", status=400)
    after = thread.messages.filter(visible_to(request.user), public_id=after_id).first()
    if after is None:
        return HttpResponse("That message is not in this thread.", status=404)
    shown, later = transcript_after(thread=thread, user=request.user, after=after)
    context = {"thread": thread, "messages_html": render_bubbles(shown), "later": later}
    return render(request, "chat/_later.html", context)


@require_POST
def thread_seen(request, thread):
    """The tab showing the thread was looked at: its replies up to `seq` are read."""
    thread = thread_for(request, thread, Need.READ)
    try:
        seq = int(request.POST.get("seq", ""))
    except ValueError:
        return HttpResponse("Say up to which message the thread was seen.", status=400)
    threads.thread_mark_seen(thread=thread, user=request.user, seq=seq)
    return HttpResponse(status=204)


@require_GET
def thread_earlier(request, thread):
    """The messages just before the oldest one a page shows (it asks as the reader scrolls up)."""
    thread = thread_for(request, thread, Need.READ)
    before_id = _cursor(request, "before")
    if before_id is None:
        return HttpResponse("Say which message to load the earlier ones before.", status=400)
    before = (
        messages_for_user(user=request.user, need=Need.READ).filter(public_id=before_id).first()
    )
    page = (
        transcript_page(thread=thread, user=request.user, before=before)
        if before is not None
        else None
    )
    if page is None:
        return HttpResponse("That message is not in this thread.", status=404)
    return render(request, "chat/_earlier.html", _page_context(thread, page))


def _opening_page(request, thread):
    """The latest page, or (opened from a search hit, ?at=) the page around that message."""
    at = _cursor(request, "at")
    target = thread.messages.filter(visible_to(request.user), public_id=at).first() if at else None
    if target is not None:
        return transcript_page_around(thread=thread, user=request.user, message=target)
    return transcript_page(thread=thread, user=request.user, own=thread.next_seq > 1), None


def _page_context(thread, page, roles=None) -> dict:
    return {
        "thread": thread,
        "earlier": page.earlier,
        "inherited_html": render_bubbles(page.inherited, inherited=True, roles=roles),
        "messages_html": render_bubbles(page.own, roles=roles),
    }


@require_POST
def thread_rename(request, thread):
    thread = thread_for(request, thread, Need.TALK)
    try:  # the service validates the label
        threads.thread_rename(thread=thread, label=request.POST.get("label", ""))
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=422)
    if not request.htmx:
        return redirect("chat:thread_detail", thread=thread.public_id)
    return render(request, "chat/_thread_label.html", {"thread": thread})


@require_POST
def thread_clear(request, thread):
    thread = thread_for(request, thread, Need.OWN)
    lifecycle.thread_clear(thread=thread)
    url = reverse("chat:thread_detail", kwargs={"thread": thread.public_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_GET
def thread_export(request, thread):
    thread = thread_for(request, thread, Need.READ)
    kind = request.GET.get("format", "md")
    exporters = {
        "md": (export_markdown, "text/markdown; charset=utf-8"),
        "json": (export_json, "application/json"),
        "html": (export_html, "text/html; charset=utf-8"),
    }
    if kind not in exporters:
        return HttpResponse("Choose format=md, format=json or format=html.", status=400)
    exporter, content_type = exporters[kind]
    body, filename = exporter(thread, user=request.user)
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = content_disposition(filename)
    return response


@require_POST
def message_branch(request, message):
    """Branch from here: a new thread whose history ends at this message."""
    message = message_for(request, message, Need.TALK)
    branch = threads.thread_branch(thread=message.thread, message=message)
    url = reverse("chat:thread_detail", kwargs={"thread": branch.public_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
def message_edit(request, message):
    """Send an edited user message again, as a new branch."""
    message = own_message_for(request, message)
    try:
        posted = posting.message_edit(
            message=message, author=request.user, text=request.POST.get("text", "")
        )
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=422)
    branch = posted.redirect_to or message.thread
    url = reverse("chat:thread_detail", kwargs={"thread": branch.public_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _waiting_attachments(request, thread) -> list:
    """The attachments the composer sends (still waiting, the sender's, this session's)."""
    ids = request.POST.getlist("attachments")
    found = attachments_waiting(owner=request.user, thread=thread, ids=ids)
    if len(found) != len(set(ids)):
        raise ValidationError("An attachment is no longer there: remove it and attach it again.")
    return found


@require_POST
def message_create(request, thread):
    thread = thread_for(request, thread, Need.TALK)
    form = MessageForm(request.POST)
    text = request.POST.get("text", "")
    try:
        client_token: uuid.UUID | None = uuid.UUID(request.POST.get("client_token", ""))
    except ValueError:
        client_token = None  # an old page without a token: posted as it is
    try:
        form.is_valid()
        posted = posting.message_post(
            thread=thread, author=request.user, text=text, client_token=client_token,
            attachments=_waiting_attachments(request, thread),
        )  # fmt: skip
    except ValidationError as exc:
        # Keep what the person typed and attached: an error never loses their words.
        waiting = request.POST.getlist("attachments")
        context = {
            **composer_context(session=thread.session, thread=thread),
            "form": form,
            "error": " ".join(exc.messages),
            "attachments": attachments_waiting(owner=request.user, thread=thread, ids=waiting),
        }
        return render(request, "chat/_composer.html", context, status=422)
    target = posted.redirect_to or thread
    if posted.redirect_to is not None or not request.htmx:
        url = reverse("chat:thread_detail", kwargs={"thread": target.public_id})
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    context_session = posted.session or Session.objects.select_related("credential").get(
        pk=thread.session_id
    )
    context = {
        **composer_context(
            session=context_session,
            thread=thread,
            links=posted.links,
        ),
        "form": MessageForm(),
        "appended_html": render_bubbles(
            posted.messages,
            roles={link.role.handle: link.role for link in posted.links or ()},
        ),
        "status_html": render_thread_status(thread) if posted.queued else "",
        "controls_html": render_session_controls(context_session)
        if posted.controls_changed
        else "",
    }
    return render(request, "chat/_composer.html", context)


@require_GET
def message_bubble(request, message):
    """One bubble over HTTP: a tab fetches a message too large for a websocket frame."""
    message = message_for(request, message, Need.READ)
    return HttpResponse(render_bubbles([message]))


@require_GET
def message_source(request, message):
    """A message's Markdown source as plain text, for its Copy button."""
    message = message_for(request, message, Need.READ)
    return HttpResponse(shown_text(message), content_type="text/plain; charset=utf-8")


@require_POST
def message_rerun(request, message):
    """Retry a failed reply or regenerate any settled one; the bubble updates over the socket."""
    message = message_for(request, message, Need.TALK)
    try:
        replies.reply_rerun(message=message, by=request.user)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=409)
    if not request.htmx:
        return redirect("chat:thread_detail", thread=message.thread.public_id)
    return HttpResponse(status=204)


@require_POST
def thread_interrupt(request, thread):
    thread = thread_for(request, thread, Need.TALK)
    replies.thread_interrupt(thread=thread, by=request.user)
    if not request.htmx:
        return redirect("chat:thread_detail", thread=thread.public_id)
    return render(request, "chat/_interrupted.html", {"thread": thread})
