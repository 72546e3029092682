"""Sharing a thread by link: the owner makes a read-only link (up to a message, or following the
thread live; expiring or not), lists and revokes their links; anyone with a link reads the
thread without logging in. The public pages are `noindex` and send no referrer (the token is
in the address)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.attachments.headers import content_disposition
from apps.chat.access import Need
from apps.chat.display.shared import (
    links_for_user,
    shared_attachment,
    shared_entries,
    shared_link,
    shared_role_speaks,
    shared_state,
)
from apps.chat.models import SessionRole, SharedLink
from apps.chat.records.sharing import EXPIRY_DAYS, share_create, share_revoke, share_viewed
from apps.chat.selectors import sessions_for_user, thread_message, transcript_messages
from apps.chat.web.lookup import thread_for
from apps.providers import crypto
from apps.roles.selectors import roles_offered

SHOWN_CHOICES = 200  # the newest messages offered as "up to" points


# The public pages load nothing but the page's own script (htmx, for a live link's polling).
PUBLIC_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def _public(response):
    response.setdefault("Content-Security-Policy", PUBLIC_CSP)
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "private, no-store"
    return response


def _share_url(request, link: SharedLink) -> str:
    token = crypto.decrypt(link.token_encrypted)
    return request.build_absolute_uri(reverse("chat:shared_thread", args=[token]))


@require_http_methods(["GET", "POST"])
def thread_share(request, thread):
    """The owner's share form (GET) and the link it makes (POST)."""
    thread = thread_for(request, thread, Need.OWN)
    made, error = None, ""
    if request.method == "POST":
        up_to = None
        pick = request.POST.get("up_to", "live")
        if pick != "live":
            up_to = thread_message(thread=thread, public_id=pick) or next(
                (m for m in transcript_messages(thread=thread) if str(m.public_id) == pick), None
            )
        days = request.POST.get("expires", "")
        try:
            if pick != "live" and (up_to is None or up_to.private):
                raise ValidationError(
                    "Choose a message of this chat (not a whisper) to share up to."
                )
            if days not in EXPIRY_DAYS:
                raise ValidationError("Choose when the link expires.")
            link, _ = share_create(
                thread=thread, by=request.user, up_to=up_to, expires_in_days=EXPIRY_DAYS[days]
            )
            made = {"link": link, "url": _share_url(request, link)}
        except ValidationError as exc:
            error = " ".join(exc.messages)
    shown = [m for m in transcript_messages(thread=thread, user=request.user) if not m.private]
    return render(
        request,
        "chat/_share_form.html",
        {"thread": thread, "made": made, "error": error,
         "choices": list(reversed(shown[-SHOWN_CHOICES:]))},
        status=422 if error else 200,
    )  # fmt: skip


@require_GET
def share_list(request):
    links = links_for_user(request.user)
    rows = [{"link": link, "url": _share_url(request, link)} for link in links]
    return render(request, "chat/shares.html", {"rows": rows})


@require_POST
def share_revoke_view(request, link):
    share_revoke(link=get_object_or_404(SharedLink, public_id=link, created_by=request.user))
    return redirect("chat:share_list")


def _link_or_404(token: str) -> SharedLink:
    link = shared_link(token)
    if link is None:
        raise Http404("This link does not exist, was revoked, or has expired.")
    return link


@login_not_required
@require_GET
def shared_thread(request, token):
    link = _link_or_404(token)
    share_viewed(link=link)
    state = shared_state(link)
    context = {"link": link, "token": token, "entries": shared_entries(link, token, state),
               "thread": link.thread, "version": state[2]}  # fmt: skip
    return _public(render(request, "chat/shared.html", context))


@login_not_required
@require_GET
def shared_transcript(request, token):
    """The transcript alone, polled by a live link's page; once the link is revoked or expired,
    a 404 whose notice replaces it (and ends the polling)."""
    link = shared_link(token)
    if link is None:
        return _public(render(request, "chat/_shared_ended.html", status=404))
    state = shared_state(link)
    if request.GET.get("v") == state[2]:
        return _public(HttpResponse(status=204))  # nothing new: the page keeps what it shows
    context = {"link": link, "token": token, "entries": shared_entries(link, token, state),
               "version": state[2]}  # fmt: skip
    return _public(render(request, "chat/_shared_transcript.html", context))


@login_not_required
@require_GET
def shared_attachment_view(request, token, attachment):
    found = shared_attachment(_link_or_404(token), attachment)
    if found is None:
        raise Http404("No such file on this page.")
    response = FileResponse(found.file.open("rb"), content_type=found.media_type)
    if not found.is_image:
        response["Content-Disposition"] = content_disposition(found.name)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return _public(response)


@require_GET
def role_avatar(request, handle):
    """A role's picture, for whoever may add the role to a session or reads a session it is
    in (another person's character shows in the rooms it speaks in, and nowhere else)."""
    readable = sessions_for_user(user=request.user, need=Need.READ)
    in_rooms = SessionRole.objects.filter(session__in=readable).values("role_id")
    role = (
        roles_offered(request.user, also=in_rooms).filter(handle=handle).exclude(avatar="").first()
    )
    if role is None:
        raise Http404("No picture.")
    response = FileResponse(role.avatar.open("rb"), content_type="image/png")
    response["Cache-Control"] = "private, max-age=86400"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_not_required
@require_GET
def shared_avatar(request, token, handle):
    role = shared_role_speaks(_link_or_404(token), handle)
    if role is None or not role.avatar:
        raise Http404("No picture.")
    response = FileResponse(role.avatar.open("rb"), content_type="image/png")
    response["X-Content-Type-Options"] = "nosniff"
    return _public(response)
