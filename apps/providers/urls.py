from django.urls import path

from apps.providers import views

app_name = "providers"

urlpatterns = [
    path("credentials/", views.credential_list, name="credential_list"),
    path("credentials/new/", views.credential_edit, name="credential_create"),
    path("credentials/models/", views.credential_models, name="credential_models"),
    path("credentials/<uuid:credential>/", views.credential_edit, name="credential_edit"),
    path(
        "credentials/<uuid:credential>/delete/", views.credential_delete, name="credential_delete"
    ),
    path("credentials/<uuid:credential>/test/", views.credential_test, name="credential_test"),
]
