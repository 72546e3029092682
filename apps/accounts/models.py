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


class ProviderIdentity(models.Model):
    """A person as the team's OpenID Connect provider knows them: its issuer and subject,
    linked to one account at the first sign-in (by a verified e-mail, or a new account). The
    link, not the e-mail, finds the account afterwards: an address that changes hands at the
    provider cannot open someone else's account."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_identities"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    email = models.EmailField(blank=True)  # as the provider last said
    linked_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="provider_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
