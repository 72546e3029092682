from django.urls import path

from apps.chat.live.consumers import ThreadConsumer

websocket_urlpatterns = [
    path("ws/threads/<uuid:thread>/", ThreadConsumer.as_asgi()),
]
