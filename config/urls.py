from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("apps.accounts.urls")),
    path("", include("apps.providers.urls")),
    path("", include("apps.connectors.urls")),
    path("", include("apps.chat.web.urls")),
]

handler403 = "config.errors.permission_denied"
