from django.contrib import admin

from apps.accounts.models import Persona, ProviderIdentity


@admin.register(Persona)
class PersonaAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "updated_at"]
    list_filter = ["owner"]
    search_fields = ["name", "text"]


@admin.register(ProviderIdentity)
class ProviderIdentityAdmin(admin.ModelAdmin):
    """Who signs in through the provider as whom; deleting a row makes the next sign-in match
    by verified e-mail again (to move an identity to another account)."""

    list_display = ["user", "email", "subject", "issuer", "last_sign_in_at"]
    search_fields = ["user__username", "email", "subject"]
    readonly_fields = ["issuer", "subject", "email", "linked_at", "last_sign_in_at"]
    raw_id_fields = ["user"]
