from django.contrib import admin
from django.db import transaction

from apps.api.models import AccessToken
from apps.api.tokens import token_revoke


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    """Tokens show by name and first characters only (the token itself is kept hashed)."""

    list_display = ["name", "user", "scope", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope"]
    search_fields = ["name", "user__username", "prefix"]
    fields = ["user", "name", "scope", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["user", "prefix", "created_at", "last_used_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # made by their owner on the account page, where it is shown once

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        with transaction.atomic():  # one way to revoke: its open streams end too
            active = list(queryset.filter(revoked_at=None))
            for token in active:
                token_revoke(token=token)
        count = len(active)
        self.message_user(request, f"Revoked {count} token(s).")
