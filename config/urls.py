from django.contrib import admin
from django.urls import include, path

from apps.api.urls import api_urls
from config import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path("", include("apps.accounts.urls")),  # before the admin: its login page is ours
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_urls, "api"))),
    path("", include("apps.api.urls")),
    path("", include("apps.providers.urls")),
    path("", include("apps.connectors.urls")),
    path("", include("apps.imports.urls")),
    path("", include("apps.roles.urls")),
    path("", include("apps.chat.web.urls")),
]

handler403 = "config.errors.permission_denied"
