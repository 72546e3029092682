from django.urls import path

from apps.connectors import views

app_name = "connectors"

urlpatterns = [
    path("mcp/", views.server_list, name="server_list"),
    path("mcp/<uuid:server>/test/", views.server_test, name="server_test"),
    path("mcp/<uuid:server>/delete/", views.server_delete, name="server_delete"),
]
