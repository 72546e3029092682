"""What an account's end means for the live side: a disabled person's tabs and streams end
at once, and signing out closes that browser's tabs (signals connected in ChatConfig.ready)."""

from __future__ import annotations

from apps.chat.display import events


def on_signed_out(sender, request, user, **kwargs) -> None:
    if user is not None and request is not None and hasattr(request, "session"):
        events.publish_signed_out_on_commit(
            user_id=user.pk, session_key=request.session.session_key
        )


def on_user_saved(sender, instance, update_fields=None, **kwargs) -> None:
    """Before a person's row is saved: an account going from active to disabled."""
    if instance.pk is None or instance.is_active:
        return
    if update_fields is not None and "is_active" not in update_fields:
        return
    if sender._default_manager.filter(pk=instance.pk, is_active=True).exists():
        events.publish_account_ended_on_commit(user_id=instance.pk)
