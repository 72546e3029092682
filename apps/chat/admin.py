from django.contrib import admin

from apps.chat.models import Message, Session, SessionRole, Thread


class SessionRoleInline(admin.TabularInline):
    model = SessionRole
    extra = 0


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "addressing_mode", "auto_rounds", "updated_at"]
    search_fields = ["name", "owner__username"]
    raw_id_fields = ["owner", "active_thread"]
    inlines = [SessionRoleInline]


class MessageInline(admin.TabularInline):
    model = Message
    fields = ["seq", "speaker", "status", "provider", "model", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ["__str__", "session", "parent", "updated_at"]
    raw_id_fields = ["session", "parent", "forked_from"]
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["thread", "seq", "speaker", "status", "provider", "model", "created_at"]
    list_filter = ["status", "speaker", "provider", "kind"]
    raw_id_fields = ["thread", "author"]
    readonly_fields = ["public_id", "usage", "ttft_ms", "duration_ms", "started_at", "finished_at"]
