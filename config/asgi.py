"""ASGI entry point: Django over HTTP, Channels consumers over websockets."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)

from config.daphne_bodies import DiskBodies, leave_bodies_to_django  # noqa: E402

django_asgi_app = DiskBodies()  # what get_asgi_application() makes, reading bodies from disk

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from apps.chat.live.routing import websocket_urlpatterns  # noqa: E402
from apps.chat.live.shutdown import close_tabs_on_shutdown  # noqa: E402
from config import urls  # noqa: E402, F401  (loaded now, so frozen with the rest)
from config.heap import freeze_startup_heap  # noqa: E402

close_tabs_on_shutdown()  # a stopping daphne asks its tabs to reconnect elsewhere at once
leave_bodies_to_django()  # twisted's own parse of uploads blocks the reactor (see there)

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
freeze_startup_heap()
