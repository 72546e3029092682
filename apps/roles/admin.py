from typing import cast

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.html import format_html

from apps.roles.models import LoreEntry, Role, RoleGroup
from apps.roles.role_packs import read_pack, shipped_packs
from apps.roles.services import role_pack_apply, role_pack_load


class RolePackImportForm(forms.Form):
    shipped = forms.ChoiceField(required=False, label="A shipped pack")
    file = forms.FileField(required=False, label="…or a YAML file")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["shipped"]).choices = [("", "—")] + [
            (slug, slug) for slug in shipped_packs()
        ]

    def clean(self):
        data = super().clean() or {}
        if bool(data.get("shipped")) == bool(data.get("file")):
            raise ValidationError("Choose a shipped pack or upload a file (one of them).")
        return data


class LoreEntryInline(admin.StackedInline):
    model = LoreEntry
    extra = 0
    fields = ["name", "keys", "secondary_keys", "selective", "content", "enabled", "constant",
              "case_sensitive", "insertion_order", "priority"]  # fmt: skip


@admin.register(Role)
class RoleAdmin(admin.ModelAdmin):
    inlines = [LoreEntryInline]
    list_display = ["handle", "display_name", "swatch", "is_default", "answers_last",
                    "can_write", "pack", "owner", "sort_order"]  # fmt: skip
    list_editable = ["sort_order"]
    list_filter = ["pack", "answers_last", "can_write", ("owner", admin.EmptyFieldListFilter)]
    search_fields = ["handle", "display_name", "owner__username"]
    raw_id_fields = ["owner"]
    change_list_template = "admin/roles/role_change_list.html"

    @admin.display(description="Look")
    def swatch(self, role: Role):
        return format_html(
            '<span style="display:inline-block;padding:.1rem .5rem;border-radius:999px;'
            'border:2px solid {};">{} {}</span>',
            role.colour,
            role.icon,
            role.colour,
        )

    def get_urls(self):
        extra = [
            path(
                "import-pack/",
                self.admin_site.admin_view(self.import_pack),
                name="roles_role_import_pack",
            )
        ]
        return extra + super().get_urls()

    def import_pack(self, request):
        """Load a role pack (shipped or uploaded) and report what it created or changed."""
        if not self.has_add_permission(request):
            return redirect("admin:roles_role_changelist")
        posted = request.method == "POST"
        form = RolePackImportForm(request.POST, request.FILES) if posted else RolePackImportForm()
        if posted and form.is_valid():
            try:
                if form.cleaned_data["shipped"]:
                    report = role_pack_load(form.cleaned_data["shipped"])
                else:
                    upload = form.cleaned_data["file"]
                    text = upload.read().decode("utf-8", errors="replace")
                    report = role_pack_apply(read_pack(text, source=upload.name))
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, " ".join(report.lines()))
                return redirect(reverse("admin:roles_role_changelist"))
        context = {**self.admin_site.each_context(request), "form": form,
                   "title": "Import a role pack", "opts": self.model._meta}  # fmt: skip
        return render(request, "admin/roles/import_pack.html", context)


@admin.register(RoleGroup)
class RoleGroupAdmin(admin.ModelAdmin):
    list_display = ["handle", "display_name", "pack", "member_handles"]
    search_fields = ["handle", "display_name"]
    filter_horizontal = ["members"]

    @admin.display(description="Members")
    def member_handles(self, group: RoleGroup) -> str:
        return ", ".join(f"@{role.handle}" for role in group.members.all())

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("members")
