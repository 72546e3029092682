"""A thread shared by link: read-only, for anyone who has the link, until it expires or its
owner revokes it."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.chat.models.conversation import Message, Thread


class SharedLink(models.Model):
    """The page shows the thread up to `up_to` (or, with none, as it goes on), without
    whispers, the session's persona, memory, credentials or tools. Only a hash of the token
    finds the link; the token itself is kept encrypted, so its owner can copy the link again."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="shared_links")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_encrypted = models.TextField(editable=False)
    # The last message shown; empty: the thread as it goes on (new messages appear).
    up_to = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    views = models.PositiveIntegerField(default=0)
    last_viewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Shared link to {self.thread}"

    @property
    def live(self) -> bool:
        return self.up_to_id is None

    @property
    def active(self) -> bool:
        return self.revoked_at is None and (
            self.expires_at is None or self.expires_at > timezone.now()
        )
