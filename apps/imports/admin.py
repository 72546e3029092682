from django.contrib import admin

from apps.imports.models import ImportedConversation, ImportJob


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "status", "done", "total", "created_at", "finished_at")
    list_filter = ("status",)
    search_fields = ("name", "owner__username")
    readonly_fields = ("public_id", "owner", "name", "size", "file", "preview", "report",
                       "created_at", "finished_at")  # fmt: skip


@admin.register(ImportedConversation)
class ImportedConversationAdmin(admin.ModelAdmin):
    list_display = ("key", "owner", "session", "created_at")
    search_fields = ("key", "owner__username")
    readonly_fields = ("owner", "key", "session", "job", "created_at")
