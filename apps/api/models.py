from django.conf import settings
from django.db import models


class TokenScope(models.TextChoices):
    READ = "read", "Read: sessions, threads, messages and live streams"
    POST = "post", "Read and post: also send messages, stop, retry and regenerate"


class AccessToken(models.Model):
    """A personal access token for the API and `parley chat`: shown once, kept only hashed.
    Every call made with it acts as its user, with what its scope allows."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens"
    )
    name = models.CharField(max_length=80)
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.READ)
    prefix = models.CharField(max_length=16, help_text="The token's first characters, to tell it.")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.user})"

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def scope_name(self) -> str:
        """The scope in a few words: "read", or "read and post"."""
        return "read and post" if self.can_post else "read"

    @property
    def can_post(self) -> bool:
        return self.scope == TokenScope.POST
