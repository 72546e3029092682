from django.urls import path

from apps.imports import views

app_name = "imports"

urlpatterns = [
    path("account/import/", views.import_list, name="import_list"),
    path("account/import/begin/", views.import_begin, name="import_begin"),
    path("account/import/<uuid:job>/", views.import_detail, name="import_detail"),
    path("account/import/<uuid:job>/piece/", views.import_piece, name="import_piece"),
    path("account/import/<uuid:job>/progress/", views.import_progress, name="import_progress"),
    path("account/import/<uuid:job>/start/", views.import_start, name="import_start"),
    path("account/import/<uuid:job>/cancel/", views.import_cancel, name="import_cancel"),
]
