"""Writes for shared links: make one (the token is returned once, kept hashed and encrypted),
revoke it, count a view."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db.models import F
from django.utils import timezone

from apps.chat.display.shared import share_token_hash
from apps.chat.models import Message, SharedLink, Thread
from apps.providers import crypto

EXPIRY_DAYS = {"1": 1, "7": 7, "30": 30, "": None}  # the form's choices ("" never)
MAX_LINKS_PER_THREAD = 50


def share_create(
    *, thread: Thread, by, up_to: Message | None, expires_in_days: int | None
) -> tuple[SharedLink, str]:
    """A read-only link to `thread` (the caller has checked `by` owns its session): up to
    `up_to` (a message of its transcript), or following it live; expiring after so many days."""
    if expires_in_days is not None and not 1 <= expires_in_days <= 365:
        raise ValidationError("A link expires after 1 to 365 days, or never.")
    if (
        SharedLink.objects.filter(thread=thread, revoked_at__isnull=True).count()
        >= MAX_LINKS_PER_THREAD
    ):
        raise ValidationError(
            f"This chat has {MAX_LINKS_PER_THREAD} links already: revoke some first."
        )
    token = secrets.token_urlsafe(24)
    link = SharedLink.objects.create(
        thread=thread,
        created_by=by,
        token_hash=share_token_hash(token),
        token_encrypted=crypto.encrypt(token),
        up_to=up_to,
        expires_at=timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None,
    )
    return link, token


def share_revoke(*, link: SharedLink) -> SharedLink:
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])
    return link


def share_viewed(*, link: SharedLink) -> None:
    SharedLink.objects.filter(pk=link.pk).update(
        views=F("views") + 1, last_viewed_at=timezone.now()
    )
