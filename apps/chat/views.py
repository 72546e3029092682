"""Thin views: validate, call one service or selector, render a page or a partial."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.chat import services
from apps.chat.bubbles import render_bubbles
from apps.chat.forms import MessageForm, SessionCreateForm
from apps.chat.models import Thread
from apps.chat.selectors import sessions_for_user, thread_messages, threads_for_user
from apps.providers.selectors import credentials_for_user


@require_GET
def session_list(request):
    sessions = sessions_for_user(user=request.user).select_related("active_thread")
    return render(
        request, "chat/session_list.html", {"sessions": sessions, "form": SessionCreateForm()}
    )


@require_POST
def session_create(request):
    form = SessionCreateForm(request.POST)
    name = form.cleaned_data["name"] if form.is_valid() else ""
    session = services.session_create(owner=request.user, name=name)
    return redirect("chat:thread_detail", thread=session.active_thread.public_id)


@require_GET
def session_detail(request, session):
    session = get_object_or_404(sessions_for_user(user=request.user), public_id=session)
    thread = session.active_thread or services.thread_create(session=session)
    return redirect("chat:thread_detail", thread=thread.public_id)


@require_POST
def thread_create(request, session):
    session = get_object_or_404(sessions_for_user(user=request.user), public_id=session)
    thread = services.thread_create(session=session)
    url = reverse("chat:thread_detail", kwargs={"thread": thread.public_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
def session_provider(request, session):
    session = get_object_or_404(sessions_for_user(user=request.user), public_id=session)
    public_id = request.POST.get("credential") or ""
    credential = None
    if public_id:
        credential = get_object_or_404(credentials_for_user(user=request.user), public_id=public_id)
    services.session_set_provider(
        session=session, credential=credential, model=request.POST.get("model", "")
    )
    return redirect("chat:session_detail", session=session.public_id)


@require_GET
def thread_detail(request, thread):
    thread = get_object_or_404(threads_for_user(user=request.user), public_id=thread)
    session = thread.session
    context = {
        "session": session,
        "credentials": credentials_for_user(user=request.user),
        "thread": thread,
        "threads": Thread.objects.filter(session=session).order_by("-updated_at"),
        "messages_html": render_bubbles(thread_messages(thread=thread).select_related("author")),
        "form": MessageForm(),
    }
    return render(request, "chat/thread.html", context)


@require_POST
def message_create(request, thread):
    thread = get_object_or_404(threads_for_user(user=request.user), public_id=thread)
    form = MessageForm(request.POST)
    text = request.POST.get("text", "")
    try:
        form.is_valid()
        posted = services.message_post(thread=thread, author=request.user, text=text)
    except ValidationError as exc:
        # Keep what the person typed: an error never loses their words.
        context = {"thread": thread, "form": form, "error": " ".join(exc.messages)}
        return render(request, "chat/_composer.html", context, status=422)
    if not request.htmx:
        return redirect("chat:thread_detail", thread=thread.public_id)
    context = {
        "thread": thread,
        "form": MessageForm(),
        "appended_html": render_bubbles([posted.user_message, *posted.replies]),
    }
    return render(request, "chat/_composer.html", context)


@require_POST
def thread_interrupt(request, thread):
    thread = get_object_or_404(threads_for_user(user=request.user), public_id=thread)
    services.thread_interrupt(thread=thread)
    if not request.htmx:
        return redirect("chat:thread_detail", thread=thread.public_id)
    return render(request, "chat/_interrupted.html", {"thread": thread})
