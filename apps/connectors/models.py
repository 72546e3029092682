import json
import uuid

from django.conf import settings
from django.db import models

from apps.providers import crypto


class ServerKind(models.TextChoices):
    STDIO = "stdio", "stdio (a command run on the server; staff only)"
    HTTP = "http", "Streamable HTTP (a URL)"


class McpServer(models.Model):
    """An MCP server whose tools sessions may offer their roles.

    stdio servers run a command on Parley's own machine, so only staff define them (in the
    admin) and say who may use them; streamable HTTP servers any user may add for themselves.
    Environment variables and headers often hold secrets: they are stored encrypted and never
    shown back.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
        related_name="mcp_servers", help_text="Empty: a server defined by staff.",
    )  # fmt: skip
    name = models.SlugField(
        max_length=40, help_text="Its tools are named name__tool: letters, digits, - and _."
    )
    kind = models.CharField(max_length=8, choices=ServerKind.choices, default=ServerKind.HTTP)
    command = models.CharField(max_length=500, blank=True)
    args = models.JSONField(default=list, blank=True, help_text="The command's arguments.")
    env_encrypted = models.TextField(blank=True, editable=False)
    url = models.URLField(max_length=500, blank=True)
    headers_encrypted = models.TextField(blank=True, editable=False)
    allowed_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    allowed_groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    timeout_seconds = models.PositiveSmallIntegerField(default=20)
    tools = models.JSONField(
        default=list, blank=True, editable=False,
        help_text="The tools it listed when last tested: name, description, schema, read_only.",
    )  # fmt: skip
    last_error = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="unique_mcp_server_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display().split(' (')[0]})"

    def _secret_map(self, field: str) -> dict[str, str]:
        raw = getattr(self, field)
        return json.loads(crypto.decrypt(raw)) if raw else {}

    def env(self) -> dict[str, str]:
        return self._secret_map("env_encrypted")

    def headers(self) -> dict[str, str]:
        return self._secret_map("headers_encrypted")

    def set_env(self, env: dict[str, str]) -> None:
        self.env_encrypted = crypto.encrypt(json.dumps(env)) if env else ""

    def set_headers(self, headers: dict[str, str]) -> None:
        self.headers_encrypted = crypto.encrypt(json.dumps(headers)) if headers else ""

    @property
    def secret_names(self) -> list[str]:
        """The names (never the values) of its environment variables or headers."""
        return sorted(self.env() if self.kind == ServerKind.STDIO else self.headers())
