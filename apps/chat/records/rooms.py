"""Writes for shared rooms: who besides the owner is in a session, and the links that let
people in. Only the owner changes who is in the room; anyone but the owner may leave it."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.chat.display import events
from apps.chat.models import (
    Membership,
    QueuedMessage,
    RoomInvite,
    RoomRole,
    Session,
    Thread,
    person_name,
)
from apps.chat.records.text import storable

INVITE_LIFETIME = timedelta(days=7)
LONGEST_INVITE_LIFETIME = timedelta(days=30)


def _owner_only(session: Session, by) -> None:
    if session.owner_id != by.pk:
        raise PermissionDenied("Only the session's owner can change who is in the room.")


def _role(role: str) -> str:
    if role not in RoomRole.values:
        raise ValidationError(f"“{role}” is not a room role: choose member or viewer.")
    return role


def member_add(*, session: Session, by, username: str, role: str = RoomRole.MEMBER) -> Membership:
    """Let a person with an account here into the room, by username."""
    _owner_only(session, by)
    role = _role(role)
    username = storable(username.strip().lstrip("@"))[:150]  # no NUL reaches the database
    person = get_user_model().objects.filter(username__iexact=username, is_active=True).first()
    if person is None:
        raise ValidationError(f"Nobody here is called “{username}”: they need an account first.")
    if person.pk == session.owner_id:
        raise ValidationError("You own this session: you are already in the room.")
    try:
        with transaction.atomic():
            return Membership.objects.create(session=session, user=person, role=role, added_by=by)
    except IntegrityError:
        raise ValidationError(f"{person.username} is already in the room.") from None


def member_set_role(*, membership: Membership, by, role: str) -> Membership:
    """A member becomes a viewer or the other way round; their open tabs reload with it."""
    _owner_only(membership.session, by)
    role = _role(role)
    if role != membership.role:
        with transaction.atomic():
            membership.role = role
            membership.save(update_fields=["role"])
            events.publish_room_left_on_commit(
                session=membership.session, user_id=membership.user_id, left=False
            )
    return membership


def member_set_budget(*, membership: Membership, by, tokens: int | None) -> Membership:
    """A cap on the tokens this person's messages may spend a day (None: no cap)."""
    _owner_only(membership.session, by)
    if tokens is not None and not 0 <= tokens <= 2_000_000_000:
        raise ValidationError("A daily budget is a number of tokens from 0 to 2,000,000,000.")
    membership.daily_token_budget = tokens
    membership.save(update_fields=["daily_token_budget"])
    return membership


def member_remove(*, membership: Membership, by) -> None:
    """The owner takes someone out of the room, or a member leaves it."""
    if by.pk not in (membership.session.owner_id, membership.user_id):
        raise PermissionDenied("Only the owner can take someone else out of the room.")
    session, person = membership.session, membership.user
    with transaction.atomic():
        membership.delete()
        # Their messages waiting in a queue are kept, held for someone to send or drop.
        held = QueuedMessage.objects.filter(thread__session=session, author=person)
        threads = set(held.values_list("thread_id", flat=True))
        held.update(held_because=f"{person_name(person)} is no longer in the room")
        for thread in Thread.objects.filter(pk__in=threads):
            events.publish_thread_status_on_commit(thread=thread)
        events.publish_room_left_on_commit(session=session, user_id=person.pk, left=True)


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invite_create(
    *, session: Session, by, role: str = RoomRole.MEMBER, lifetime: timedelta = INVITE_LIFETIME
) -> tuple[RoomInvite, str]:
    """A one-time link into the room: the invite and its token (shown once, never stored)."""
    _owner_only(session, by)
    if not timedelta(minutes=5) <= lifetime <= LONGEST_INVITE_LIFETIME:
        raise ValidationError("An invite lasts from 5 minutes to 30 days.")
    token = secrets.token_urlsafe(24)
    invite = RoomInvite.objects.create(
        session=session, role=_role(role), token_hash=_token_hash(token), created_by=by,
        expires_at=timezone.now() + lifetime,
    )  # fmt: skip
    return invite, token


def invite_revoke(*, invite: RoomInvite, by) -> None:
    _owner_only(invite.session, by)
    if invite.revoked_at is None and invite.used_at is None:
        invite.revoked_at = timezone.now()
        invite.save(update_fields=["revoked_at"])


def invite_preview(*, token: str) -> RoomInvite | None:
    """The invite a link names while it still works (None: unknown, used, revoked, expired)."""
    return (
        RoomInvite.objects.select_related("session__owner")
        .filter(
            token_hash=_token_hash(token),
            used_at__isnull=True,
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
        )
        .first()
    )


def invite_accept(*, token: str, user) -> Membership:
    """Join the room an invite link names. Every way a link can be wrong says the same thing
    (a guessed token learns nothing), except to the person who already used it."""
    unusable = ValidationError("This invite link does not work: ask for a new one.")
    with transaction.atomic():
        invite = (
            RoomInvite.objects.select_for_update()
            .select_related("session")
            .filter(token_hash=_token_hash(token))
            .first()
        )
        if invite is None or invite.revoked_at is not None or invite.expires_at <= timezone.now():
            raise unusable
        if invite.used_at is not None:
            kept = Membership.objects.filter(session=invite.session, user=user).first()
            if invite.used_by_id == user.pk and kept is not None:
                return kept  # the same person following their link again
            raise unusable  # someone else's, or its user has left or been removed since
        if invite.session.owner_id == user.pk:
            raise ValidationError("You own this session: you are already in the room.")
        already = Membership.objects.filter(session=invite.session, user=user).first()
        if already is not None:  # the link stays unused, for whoever it was meant for
            raise ValidationError(
                f"You are already in this room as a {already.role}: the link was not used, "
                "so it still works for someone else.",
                code="already_in",
            )
        membership = Membership.objects.create(
            session=invite.session, user=user, role=invite.role, added_by=invite.created_by
        )
        invite.used_by, invite.used_at = user, timezone.now()
        invite.save(update_fields=["used_by", "used_at"])
    return membership
