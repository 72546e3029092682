from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "apps.chat"
    label = "chat"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_out
        from django.db.models.signals import pre_save

        from apps.chat.records import accounts

        user_logged_out.connect(accounts.on_signed_out, dispatch_uid="parley-signed-out")
        pre_save.connect(
            accounts.on_user_saved, sender=get_user_model(), dispatch_uid="parley-user-disabled"
        )
