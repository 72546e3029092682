from django.urls import path

from apps.chat import views

app_name = "chat"

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("sessions/new/", views.session_create, name="session_create"),
    path("s/<uuid:session>/", views.session_detail, name="session_detail"),
    path("s/<uuid:session>/provider/", views.session_provider, name="session_provider"),
    path("s/<uuid:session>/threads/new/", views.thread_create, name="thread_create"),
    path("t/<uuid:thread>/", views.thread_detail, name="thread_detail"),
    path("t/<uuid:thread>/messages/", views.message_create, name="message_create"),
    path("t/<uuid:thread>/interrupt/", views.thread_interrupt, name="thread_interrupt"),
]
