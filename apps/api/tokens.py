"""Personal access tokens: made (the plaintext is returned once), found by hash, revoked."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.api.models import AccessToken, TokenScope
from apps.chat.display import events
from apps.chat.records.text import storable

PREFIX = "pat_"
TOUCH_EVERY = timedelta(minutes=1)  # last-used time is written at most this often


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(*, user, name: str, scope: str) -> tuple[AccessToken, str]:
    """A new token and its plaintext, which is never stored or shown again."""
    name = " ".join(storable(name).split())[:80]
    if not name:
        raise ValidationError({"name": "Name the token, e.g. laptop terminal."})
    if scope not in TokenScope.values:
        raise ValidationError({"scope": "Choose read, or read and post."})
    raw = PREFIX + secrets.token_urlsafe(32)
    token = AccessToken.objects.create(
        user=user, name=name, scope=scope, prefix=raw[:12], token_hash=_hash(raw)
    )
    return token, raw


def token_authenticate(raw: str) -> AccessToken | None:
    """The active token `raw` is, with its user; None for anything else."""
    if not raw.startswith(PREFIX) or len(raw) > 200:
        return None
    token = (
        AccessToken.objects.select_related("user")
        .filter(token_hash=_hash(raw), revoked_at=None, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > TOUCH_EVERY:
        AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def token_revoke(*, token: AccessToken) -> AccessToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        events.publish_token_revoked_on_commit(user_id=token.user_id, token_id=token.pk)
    return token
