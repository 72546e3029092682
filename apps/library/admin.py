from django.contrib import admin

from apps.library.models import Document


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["name", "session", "state", "pages", "chunks_count", "size", "created_at"]
    list_filter = ["state"]
    search_fields = ["name", "session__name"]
    raw_id_fields = ["session", "added_by"]
    readonly_fields = ["sha256", "chunks_count", "indexed_at", "pages"]
