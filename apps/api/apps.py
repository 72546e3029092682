from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "apps.api"
    label = "api"
    verbose_name = "API and tokens"
    default_auto_field = "django.db.models.BigAutoField"
