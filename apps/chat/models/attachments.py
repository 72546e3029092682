"""Files attached to messages: images, PDFs and text files, as `apps.attachments.sniff` keeps
them. A row is one upload (its name, who sent it, the message it went with); its bytes live in
Django's storage under the session and their hash, so the same file attached twice in a session
is stored once and sent to providers byte for byte the same (the cached prefix holds)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from apps.chat.models.conversation import Message, QueuedMessage, Session, Thread


class AttachmentKind(models.TextChoices):
    IMAGE = "image", "image"
    PDF = "pdf", "PDF"
    TEXT = "text", "text file"


EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "application/pdf": "pdf"}


def stored_name(session: Session, sha256: str, media_type: str) -> str:
    """Where a session's copy of these bytes lives in the storage."""
    return f"attachments/{session.public_id}/{sha256}.{EXTENSIONS.get(media_type, 'txt')}"


class Attachment(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="attachments")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments"
    )
    # Where it was uploaded; the message it was sent with, once it was (none: still waiting
    # in its composer).
    thread = models.ForeignKey(Thread, null=True, blank=True, on_delete=models.SET_NULL)
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="attachments"
    )
    # A message sent while a turn ran waits in the thread's queue with its attachments.
    queued = models.ForeignKey(
        QueuedMessage, null=True, blank=True, on_delete=models.SET_NULL, related_name="attachments"
    )
    position = models.PositiveSmallIntegerField(default=0)  # its place among the message's
    name = models.CharField(max_length=255)
    kind = models.CharField(max_length=8, choices=AttachmentKind)
    media_type = models.CharField(max_length=100)  # sniffed, never the client's
    size = models.PositiveIntegerField()  # bytes stored
    sha256 = models.CharField(max_length=64)
    file = models.FileField(max_length=255)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    pages = models.PositiveIntegerField(null=True, blank=True)
    # The stand-in for a model that cannot read it: a description of an image, written once by
    # a model that can see; a PDF's text.
    stand_in = models.TextField(blank=True)
    described_by = models.CharField(max_length=160, blank=True)  # "openai · gpt-4.1-mini"
    # A PDF's first page as a PNG, shown in the bubble and the lightbox.
    preview = models.FileField(max_length=255, blank=True)
    preview_size = models.PositiveIntegerField(default=0)  # bytes; counted in the quota too
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["message_id", "position", "pk"]
        indexes = [models.Index(fields=["session", "sha256"], name="attachment_by_hash")]

    def __str__(self) -> str:
        return f"{self.name} ({self.media_type}, {self.size:,} bytes)"

    @property
    def is_image(self) -> bool:
        return self.kind == AttachmentKind.IMAGE
