from django.apps import AppConfig


class LibraryConfig(AppConfig):
    name = "apps.library"
    verbose_name = "Library"
