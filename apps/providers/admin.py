from django.contrib import admin

from apps.providers.models import Credential, ModelPrice


@admin.register(Credential)
class CredentialAdmin(admin.ModelAdmin):
    """Keys are write-only: the admin shows the masked form and never the ciphertext."""

    list_display = [
        "name",
        "owner",
        "provider",
        "auth_style",
        "masked_key",
        "base_url",
        "updated_at",
    ]
    list_filter = ["provider"]
    search_fields = ["name", "owner__username"]
    fields = [
        "owner",
        "name",
        "provider",
        "base_url",
        "auth_style",
        "auth_header",
        "azure_deployment",
        "azure_api_version",
        "masked_key",
    ]
    readonly_fields = ["masked_key"]
    raw_id_fields = ["owner"]


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """US dollars per million tokens; a name also prices the models it starts."""

    list_display = [
        "model",
        "provider",
        "input_per_mtok",
        "output_per_mtok",
        "cache_read_per_mtok",
        "cache_write_per_mtok",
        "updated_at",
    ]
    list_editable = [
        "input_per_mtok",
        "output_per_mtok",
        "cache_read_per_mtok",
        "cache_write_per_mtok",
    ]
    list_filter = ["provider"]
    search_fields = ["model"]
