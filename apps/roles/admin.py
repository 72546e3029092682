from django.contrib import admin

from apps.roles.models import Role


@admin.register(Role)
class RoleAdmin(admin.ModelAdmin):
    list_display = [
        "handle",
        "display_name",
        "icon",
        "colour",
        "is_default",
        "answers_last",
        "can_write",
        "sort_order",
    ]
    list_editable = ["sort_order"]
    search_fields = ["handle", "display_name"]
