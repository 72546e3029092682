from django.apps import AppConfig


class RolesConfig(AppConfig):
    name = "apps.roles"
    label = "roles"
