from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from apps.providers.models import Credential, ModelPrice, ModelReads, ReadsSource
from apps.providers.services import credential_checked


class CredentialAdminForm(forms.ModelForm):
    """The same checks as the person's own form, from the provider's description: its base
    URL, its ways of sending the key, its settings (stored in `options`)."""

    class Meta:
        model = Credential
        fields = ["owner", "name", "provider", "base_url", "auth_style", "auth_header", "options"]

    def clean(self):
        data = super().clean() or {}
        if self.errors:
            return data
        options = data.get("options") or {}
        if not isinstance(options, dict):
            self.add_error("options", "Give the settings as a JSON object.")
            return data
        try:
            _, data["base_url"], data["auth_style"], data["options"] = credential_checked(
                provider=data["provider"], base_url=data.get("base_url") or "",
                auth_style=data.get("auth_style") or "", auth_header=data.get("auth_header") or "",
                settings={key: str(value) for key, value in options.items()},
            )  # fmt: skip
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                self.add_error(field if field in self.fields else "options", errors)
        return data


@admin.register(Credential)
class CredentialAdmin(admin.ModelAdmin):
    """Keys are write-only: the admin shows the masked form and never the ciphertext."""

    form = CredentialAdminForm
    list_display = ["name", "owner", "provider", "auth_style", "masked_key", "base_url",
                    "updated_at"]  # fmt: skip
    list_filter = ["provider"]
    search_fields = ["name", "owner__username"]
    fields = [*CredentialAdminForm.Meta.fields, "masked_key"]
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


@admin.register(ModelReads)
class ModelReadsAdmin(admin.ModelAdmin):
    """What models read (images, PDFs): rows the providers' model lists gave, and the admin's
    own where a list is silent or wrong. A row the admin saves is the admin's from then on
    (a later listing leaves it alone); an admin's name also covers the models it starts."""

    list_display = ["model", "provider", "images", "pdfs", "source", "updated_at"]
    list_editable = ["images", "pdfs"]
    list_filter = ["provider", "source"]
    readonly_fields = ["source"]
    search_fields = ["model"]

    def save_model(self, request, obj, form, change):
        obj.source = ReadsSource.ADMIN
        super().save_model(request, obj, form, change)
