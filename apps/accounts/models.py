"""What belongs to a person across sessions: their saved personas."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Persona(models.Model):
    """A saved "about me" text. Choosing one copies its text into a session, so editing or
    deleting the persona later never changes a session that used it."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personas"
    )
    name = models.CharField(max_length=80)
    text = models.TextField(max_length=20_000)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="persona_name_unique_per_owner")
        ]

    def __str__(self) -> str:
        return self.name
