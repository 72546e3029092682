from django.urls import path

from apps.chat.web import files_views, rooms_views, turn_views, views

app_name = "chat"

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("sessions/new/", views.session_create, name="session_create"),
    path("s/<uuid:session>/", views.session_detail, name="session_detail"),
    path("s/<uuid:session>/threads/new/", views.thread_create, name="thread_create"),
    path("s/<uuid:session>/rename/", views.session_rename, name="session_rename"),
    path("s/<uuid:session>/delete/", views.session_delete, name="session_delete"),
    path("s/<uuid:session>/settings/", views.session_settings, name="session_settings"),
    path("s/<uuid:session>/files/", files_views.files_panel, name="files_panel"),
    path("s/<uuid:session>/files/upload/", files_views.files_upload, name="files_upload"),
    path("s/<uuid:session>/files/download/", files_views.files_download, name="files_download"),
    path("s/<uuid:session>/files/delete/", files_views.files_delete, name="files_delete"),
    path("s/<uuid:session>/room/", rooms_views.room_panel, name="room_panel"),
    path("s/<uuid:session>/room/add/", rooms_views.room_add, name="room_add"),
    path("s/<uuid:session>/room/invite/", rooms_views.room_invite, name="room_invite"),
    path(
        "s/<uuid:session>/room/invite/<int:invite>/revoke/",
        rooms_views.room_invite_revoke,
        name="room_invite_revoke",
    ),
    path(
        "s/<uuid:session>/room/people/<str:username>/",
        rooms_views.room_update,
        name="room_update",
    ),
    path(
        "s/<uuid:session>/room/people/<str:username>/remove/",
        rooms_views.room_remove,
        name="room_remove",
    ),
    path("join/<str:token>/", rooms_views.room_join, name="room_join"),
    path("t/<uuid:thread>/", views.thread_detail, name="thread_detail"),
    path("t/<uuid:thread>/messages/", views.message_create, name="message_create"),
    path("t/<uuid:thread>/earlier/", views.thread_earlier, name="thread_earlier"),
    path("t/<uuid:thread>/later/", views.thread_later, name="thread_later"),
    path("t/<uuid:thread>/seen/", views.thread_seen, name="thread_seen"),
    path("s/<uuid:session>/search/", views.session_search, name="session_search"),
    path("search/", views.search_everywhere, name="search"),
    path("t/<uuid:thread>/interrupt/", views.thread_interrupt, name="thread_interrupt"),
    path("t/<uuid:thread>/rename/", views.thread_rename, name="thread_rename"),
    path("t/<uuid:thread>/clear/", views.thread_clear, name="thread_clear"),
    path("t/<uuid:thread>/export/", views.thread_export, name="thread_export"),
    path("m/<uuid:message>/", views.message_bubble, name="message_bubble"),
    path("m/<uuid:message>/source/", views.message_source, name="message_source"),
    path("m/<uuid:message>/rerun/", views.message_rerun, name="message_rerun"),
    path("m/<uuid:message>/branch/", views.message_branch, name="message_branch"),
    path("m/<uuid:message>/edit/", views.message_edit, name="message_edit"),
    path("m/<uuid:message>/continue/", turn_views.message_continue, name="message_continue"),
    path("m/<uuid:message>/new-chat/", turn_views.message_new_chat, name="message_new_chat"),
    path("q/<uuid:queued>/send-now/", turn_views.queued_send_now, name="queued_send_now"),
    path("q/<uuid:queued>/edit/", turn_views.queued_edit, name="queued_edit"),
    path("q/<uuid:queued>/cancel/", turn_views.queued_cancel, name="queued_cancel"),
]
