from django.urls import path

from apps.chat.live.consumers import ThreadConsumer, UserConsumer

websocket_urlpatterns = [
    path("ws/threads/<uuid:thread>/", ThreadConsumer.as_asgi()),
    path("ws/user/", UserConsumer.as_asgi()),
]
