from django.urls import path

from apps.roles import views

app_name = "roles"

urlpatterns = [
    path("roles/", views.role_list, name="role_list"),
    path("roles/packs/<slug:pack>/cards.zip", views.pack_cards, name="pack_cards"),
    path("roles/<str:handle>/card.<str:extension>", views.role_card, name="role_card"),
    path("roles/<str:handle>/delete/", views.role_delete, name="role_delete"),
    path("roles/<str:handle>/lorebook/", views.role_lorebook, name="role_lorebook"),
]
