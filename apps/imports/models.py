"""An import: the file a person brought, what reading it found (the preview), and what
importing it made; and which source conversations have become sessions, so importing the same
file again makes nothing twice."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.files.storage import Storage, storages
from django.db import models


def import_storage() -> Storage:
    """Where uploads wait to be read (settings.STORAGES["imports"]; apps/imports/staging.py)."""
    return storages["imports"]


class ImportStatus(models.TextChoices):
    UPLOADING = "uploading", "Uploading"
    READING = "reading", "Reading the file"
    READY = "ready", "Ready to import"
    IMPORTING = "importing", "Importing"
    DONE = "done", "Imported"
    CANCELLED = "cancelled", "Cancelled"
    FAILED = "failed", "Could not be read"


RUNNING = (ImportStatus.UPLOADING, ImportStatus.READING, ImportStatus.IMPORTING)


class ImportJob(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=255, help_text="The file's name as it was sent.")
    size = models.PositiveBigIntegerField(default=0)
    # Sent in pieces (a browser or `parley import`): how many bytes have arrived.
    received = models.PositiveBigIntegerField(default=0)
    file = models.FileField(
        max_length=255, blank=True, storage=import_storage, help_text="Deleted once imported."
    )
    status = models.CharField(
        max_length=12, choices=ImportStatus.choices, default=ImportStatus.READING
    )
    # What reading the file found: formats, conversations, messages, branches, the voices that
    # answered (each to become a role), what will be skipped and why, broken conversations.
    preview = models.JSONField(default=dict, blank=True)
    # Each voice's role: {"gpt-4o": "new"} or {"gpt-4o": "<handle of an existing role>"}.
    roles = models.JSONField(default=dict, blank=True)
    done = models.PositiveIntegerField(default=0, help_text="Conversations gone through.")
    total = models.PositiveIntegerField(default=0)
    # What importing made: sessions made, conversations already imported, broken ones.
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    # A worker took it this many times: a second time means the first one died with it (and
    # is not tried again). Its heartbeat, while it works, tells a sweep it is still alive.
    attempts = models.PositiveSmallIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Import of {self.name} ({self.status})"

    @property
    def running(self) -> bool:
        return self.status in RUNNING

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else 0


class ImportedConversation(models.Model):
    """A source conversation that became a session. Deleting the session forgets it, so the
    conversation can be imported again."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200, help_text="The source's id for the conversation.")
    session = models.ForeignKey("chat.Session", on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey(
        ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="made"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="import_each_conversation_once")
        ]

    def __str__(self) -> str:
        return self.key
