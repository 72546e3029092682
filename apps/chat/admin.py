from django.contrib import admin
from django.template.response import TemplateResponse

from apps.chat.models import (
    ContextVersion,
    Digest,
    Membership,
    Message,
    MessageUsage,
    QueuedMessage,
    RoomInvite,
    Session,
    SessionRole,
    Thread,
    ThreadSummary,
    Turn,
)
from apps.chat.usage import usage_totals


class SessionRoleInline(admin.TabularInline):
    model = SessionRole
    extra = 0
    raw_id_fields = ["credential"]


class MembershipInline(admin.TabularInline):
    model = Membership
    fk_name = "session"
    extra = 0
    raw_id_fields = ["user", "added_by"]


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "credential", "model", "addressing_mode", "auto_rounds",
                    "updated_at"]  # fmt: skip
    list_filter = ["addressing_mode"]
    search_fields = ["name", "owner__username"]
    raw_id_fields = ["owner", "active_thread", "credential"]
    inlines = [SessionRoleInline, MembershipInline]


@admin.register(ContextVersion)
class ContextVersionAdmin(admin.ModelAdmin):
    """Versions are history: read them here; restore one from the session's history page."""

    list_display = ["session", "kind", "number", "name", "changed_by", "note", "created_at"]
    list_filter = ["kind"]
    search_fields = ["session__name", "name", "text"]
    readonly_fields = ["session", "kind", "number", "name", "text", "author", "author_role",
                       "note", "created_at"]  # fmt: skip

    def has_add_permission(self, request):
        return False


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "session", "role", "daily_token_budget", "added_by", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username", "session__name", "session__owner__username"]
    raw_id_fields = ["session", "user", "added_by"]


@admin.register(RoomInvite)
class RoomInviteAdmin(admin.ModelAdmin):
    """Invites without their token (only its hash is kept): revoke one by setting its time."""

    list_display = ["session", "role", "created_by", "created_at", "expires_at", "used_by",
                    "revoked_at"]  # fmt: skip
    list_filter = ["role"]
    search_fields = ["session__name", "created_by__username"]
    exclude = ["token_hash"]
    readonly_fields = ["session", "role", "created_by", "used_by", "used_at"]


@admin.register(Digest)
class DigestAdmin(admin.ModelAdmin):
    """The "while you were away" cards written for people coming back to a room's thread."""

    list_display = ["thread", "user", "after_seq", "upto_seq", "status", "model", "created_at"]
    list_filter = ["status", "provider"]
    search_fields = ["user__username", "thread__label", "thread__session__name"]
    readonly_fields = ["thread", "user", "after_seq", "upto_seq", "provider", "model", "usage"]


class MessageInline(admin.TabularInline):
    model = Message
    fields = readonly_fields = (
        "seq",
        "speaker",
        "kind",
        "status",
        "text_preview",
        "provider",
        "model",
        "created_at",
    )
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ["seq"]

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="Text")
    def text_preview(self, message: Message) -> str:
        text = " ".join(message.text.split())
        return text[:120] + ("…" if len(text) > 120 else "")


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ["__str__", "session", "parent", "updated_at"]
    search_fields = ["label", "session__name"]
    raw_id_fields = ["session", "parent", "forked_from", "persona_version", "memory_version"]
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["thread", "seq", "speaker", "kind", "status", "provider", "model", "created_at"]
    list_filter = ["status", "speaker", "provider", "kind", "stage"]
    search_fields = ["speaker", "thread__label"]
    raw_id_fields = ["thread", "author", "turn", "credential"]
    readonly_fields = ["public_id", "usage", "ttft_ms", "duration_ms", "started_at",
                       "finished_at", "dispatched_at", "alternatives"]  # fmt: skip


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "thread",
        "auto_rounds",
        "auto_replies_done",
        "sequential",
        "rounds_stopped",
        "stopped_because",
        "created_at",
    ]
    raw_id_fields = ["thread", "user_message"]


@admin.register(QueuedMessage)
class QueuedMessageAdmin(admin.ModelAdmin):
    """Messages waiting for their thread's running turn to settle."""

    list_display = ["created_at", "thread", "author", "send_now"]
    raw_id_fields = ["thread", "author"]
    search_fields = ["text"]


@admin.register(ThreadSummary)
class ThreadSummaryAdmin(admin.ModelAdmin):
    list_display = ["thread", "covers", "provider", "model", "created_at"]
    raw_id_fields = ["thread", "covers"]
    readonly_fields = ["usage"]


@admin.register(MessageUsage)
class UsageAdmin(admin.ModelAdmin):
    """Token usage and timings per reply, with totals over the current filter."""

    list_display = ["finished_at", "speaker", "provider", "model", "input_tokens",
                    "output_tokens", "cache_read_tokens", "cache_write_tokens", "ttft_ms",
                    "duration_ms", "stop_reason", "continuations"]  # fmt: skip
    list_filter = ["provider", "model", "speaker", "stop_reason", "thread__session__owner"]
    date_hierarchy = "finished_at"
    change_list_template = "admin/chat/usage_change_list.html"

    def get_queryset(self, request):
        return (
            super().get_queryset(request).filter(finished_at__isnull=False).exclude(speaker="user")
        )

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def _tokens(self, message, key):
        return int((message.usage or {}).get(key, 0) or 0)

    @admin.display(description="input")
    def input_tokens(self, message):
        return self._tokens(message, "input")

    @admin.display(description="output")
    def output_tokens(self, message):
        return self._tokens(message, "output")

    @admin.display(description="cache read")
    def cache_read_tokens(self, message):
        return self._tokens(message, "cache_read")

    @admin.display(description="cache write")
    def cache_write_tokens(self, message):
        return self._tokens(message, "cache_write")

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        # A redirect (after a bulk action, say) has no change list to total.
        if isinstance(response, TemplateResponse) and response.context_data:
            changelist = response.context_data.get("cl")
            if changelist is not None:
                queryset = changelist.queryset.order_by()
                response.context_data["usage_totals"] = usage_totals(queryset)
        return response
