"""Thin views for a shared room: who is in it, invites, joining and leaving."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.chat.access import Need, room_access
from apps.chat.models import Membership, RoomInvite, RoomRole
from apps.chat.records import rooms
from apps.chat.records.budgets import spent_today
from apps.chat.web.lookup import session_for

JOIN_SESSION_KEY = "parley_join_link"  # the invite link being followed, kept in the session
MAX_DAILY_BUDGET = 2_000_000_000  # what the column holds, far past any day's use
INVITE_LIFETIMES = {"1h": timedelta(hours=1), "1d": timedelta(days=1), "7d": timedelta(days=7),
                    "30d": timedelta(days=30)}  # fmt: skip


def room_context(request, session) -> dict:
    """What a page of the session shows about its room and the person's place in it."""
    access = room_access(user=request.user, session=session)
    return {
        "access": access,
        "is_owner": access == "owner",
        "can_talk": access in ("owner", RoomRole.MEMBER),
        "shared": access != "owner" or session.memberships.exists(),
    }


def _panel(request, session, *, error: str = "", link: str = "", status: int = 200):
    access = room_access(user=request.user, session=session)
    memberships = list(session.memberships.select_related("user").order_by("created_at"))
    for membership in memberships:  # what the replies they started used today (the owner's)
        owner_sees = access == "owner" and membership.role != RoomRole.VIEWER
        used = spent_today(session=session, person=membership.user) if owner_sees else None
        membership.used_today = f"{used:,}" if used is not None else None
    context = {
        "session": session,
        "access": access,
        "is_owner": access == "owner",
        "memberships": memberships,
        "invites": session.invites.filter(used_at__isnull=True, revoked_at__isnull=True).order_by(
            "-created_at"
        )
        if access == "owner"
        else [],
        "roles": RoomRole.choices,
        "error": error,
        "link": link,
    }
    return render(request, "chat/_room.html", context, status=status)


@require_GET
def room_panel(request, session):
    return _panel(request, session_for(request, session, Need.READ))


def _membership(session, person: int) -> Membership:
    found = session.memberships.filter(user_id=person).select_related("user").first()
    if found is None:
        raise Http404
    return found


@require_POST
def room_add(request, session):
    session = session_for(request, session, Need.OWN)
    try:
        rooms.member_add(
            session=session,
            by=request.user,
            username=request.POST.get("username", ""),
            role=request.POST.get("role", RoomRole.MEMBER),
        )
    except ValidationError as exc:
        return _panel(request, session, error=" ".join(exc.messages), status=422)
    return _panel(request, session)


@require_POST
def room_update(request, session, person):
    session = session_for(request, session, Need.OWN)
    membership = _membership(session, person)
    raw_budget = request.POST.get("daily_token_budget", "").replace(",", "").strip()
    try:
        if raw_budget and not (raw_budget.isascii() and raw_budget.isdigit()):
            raise ValidationError("A daily budget is a whole number of tokens, or empty.")
        if raw_budget and int(raw_budget) > MAX_DAILY_BUDGET:
            raise ValidationError(f"A daily budget is at most {MAX_DAILY_BUDGET:,} tokens.")
        if "role" in request.POST:
            rooms.member_set_role(membership=membership, by=request.user, role=request.POST["role"])
        if "daily_token_budget" in request.POST:
            tokens = int(raw_budget) if raw_budget else None
            rooms.member_set_budget(membership=membership, by=request.user, tokens=tokens)
    except ValidationError as exc:
        return _panel(request, session, error=" ".join(exc.messages), status=422)
    return _panel(request, session)


@require_POST
def room_remove(request, session, person):
    """The owner takes someone out of the room; a member may take themselves out (leave)."""
    session = session_for(request, session, Need.READ)
    membership = _membership(session, person)
    if request.user.pk not in (session.owner_id, membership.user_id):
        raise PermissionDenied("Only the owner can take someone else out of the room.")
    rooms.member_remove(membership=membership, by=request.user)
    if membership.user_id == request.user.pk:  # they left
        url = reverse("chat:session_list")
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    return _panel(request, session)


@require_POST
def room_invite(request, session):
    session = session_for(request, session, Need.OWN)
    lifetime = INVITE_LIFETIMES.get(request.POST.get("lifetime", "7d"))
    if lifetime is None:
        return _panel(request, session, error="Choose how long the link works.", status=422)
    try:
        _, token = rooms.invite_create(
            session=session, by=request.user, role=request.POST.get("role", RoomRole.MEMBER),
            lifetime=lifetime,
        )  # fmt: skip
    except ValidationError as exc:
        return _panel(request, session, error=" ".join(exc.messages), status=422)
    link = request.build_absolute_uri(reverse("chat:room_join", kwargs={"token": token}))
    return _panel(request, session, link=link)


@require_POST
def room_invite_revoke(request, session, invite):
    session = session_for(request, session, Need.OWN)
    found = RoomInvite.objects.filter(session=session, pk=invite).first()
    if found is None:
        raise Http404
    rooms.invite_revoke(invite=found, by=request.user)
    return _panel(request, session)


@login_not_required
@require_GET
def room_join(request, token):
    """An invite link. Its token goes into the visitor's session at once and the browser on to
    `/join/` (through the login page when they are signed out): it never rides in a `?next=`
    or stays in the address bar, the history or a log line."""
    request.session[JOIN_SESSION_KEY] = token[:200]
    pending = reverse("chat:room_join_pending")
    if not request.user.is_authenticated:
        return redirect(f"{reverse('login')}?{urlencode({'next': pending})}")
    return redirect(pending)


@require_http_methods(["GET", "POST"])
def room_join_pending(request):
    """The invite link the person followed: GET says whose room and as what; POST joins it."""
    token = request.session.get(JOIN_SESSION_KEY, "")
    invite = rooms.invite_preview(token=token) if token else None
    if request.method == "GET":
        return render(request, "chat/room_join.html", {"invite": invite},
                      status=200 if invite else 404)  # fmt: skip
    try:
        membership = rooms.invite_accept(token=token, user=request.user)
    except ValidationError as exc:
        status = 409 if getattr(exc, "code", None) == "already_in" else 410
        return render(request, "chat/room_join.html", {"error": " ".join(exc.messages)},
                      status=status)  # fmt: skip
    request.session.pop(JOIN_SESSION_KEY, None)
    return redirect("chat:session_detail", session=membership.session.public_id)
