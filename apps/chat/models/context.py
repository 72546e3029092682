"""Named, versioned persona and memory: every change to a session's persona or memory is a
new version (who, when, why), and each thread pins the versions it began with, so a later
change never alters what an older thread's roles are told until the thread takes it."""

from django.conf import settings
from django.db import models

from apps.chat.models.conversation import Session


class ContextKind(models.TextChoices):
    PERSONA = "persona", "Persona"
    MEMORY = "memory", "Memory"


class ContextVersion(models.Model):
    """One saved version of a session's persona or of its memory."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="context_versions")
    kind = models.CharField(max_length=16, choices=ContextKind.choices)
    number = models.PositiveIntegerField()
    name = models.CharField(max_length=80, blank=True)
    text = models.TextField(blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_role = models.CharField(max_length=40, blank=True, help_text="A role that wrote it.")
    note = models.CharField(max_length=120, blank=True, help_text="Why it changed.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "kind", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "kind", "number"], name="one_context_version_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} v{self.number} of {self.session}"

    @property
    def label(self) -> str:
        return f"v{self.number}" + (f" “{self.name}”" if self.name else "")

    @property
    def changed_by(self) -> str:
        if self.author_role:
            return f"@{self.author_role}"
        return self.author.get_username() if self.author is not None else "Parley"
