from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from apps.connectors.models import McpServer, ServerKind
from apps.connectors.services import parse_pairs


class McpServerForm(forms.ModelForm):
    """Secrets are write-only: a blank field keeps the stored values, which are never shown."""

    secrets = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Environment (stdio) or headers (HTTP)",
        help_text="stdio: NAME=value per line. HTTP: Name: value per line. Stored encrypted; "
        "the saved values are never shown. Leave blank to keep them; '-' clears them.",
    )

    class Meta:
        model = McpServer
        fields = ["owner", "name", "kind", "command", "args", "url", "allowed_users",
                  "allowed_groups", "timeout_seconds"]  # fmt: skip

    def clean(self):
        data = super().clean() or {}
        kind = data.get("kind")
        if kind == ServerKind.STDIO and not data.get("command"):
            raise ValidationError("A stdio server needs a command.")
        if kind == ServerKind.HTTP and not data.get("url"):
            raise ValidationError("An HTTP server needs a URL.")
        text = (data.get("secrets") or "").strip()
        if text and text != "-":
            separator = "=" if kind == ServerKind.STDIO else ":"
            data["parsed_secrets"] = parse_pairs(text, separator=separator, what="secrets")
        return data

    def save(self, commit=True):
        server = super().save(commit=False)
        text = (self.cleaned_data.get("secrets") or "").strip()
        if text:
            pairs = self.cleaned_data.get("parsed_secrets", {})
            if server.kind == ServerKind.STDIO:
                server.set_env(pairs)
            else:
                server.set_headers(pairs)
        if commit:
            server.save()
            self.save_m2m()
        return server


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = ["name", "kind", "owner", "command", "url", "tool_count", "last_error"]
    list_filter = ["kind"]
    search_fields = ["name", "url", "command"]
    filter_horizontal = ["allowed_users", "allowed_groups"]
    readonly_fields = ["secret_names", "tools", "last_error"]

    @admin.display(description="tools")
    def tool_count(self, server: McpServer) -> int:
        return len(server.tools or [])
