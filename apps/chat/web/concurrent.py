"""Hot views that answer concurrently under daphne.

Under ASGI, Django runs every synchronous view on one thread (asgiref's thread-sensitive
mode), so a hundred composer POSTs would queue behind each other. A view wrapped here runs on
the event loop's pool of threads instead, each with its own database connection, closed (or
given back to the pool) when it ends.

`PARLEY_CONCURRENT_VIEWS = False` runs them on the request's own thread (tests that wrap each
test in a transaction need the view to see it).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.http import HttpResponseBase


def concurrent_view(view: Callable[..., HttpResponseBase]) -> Callable[..., Any]:
    on_the_pool = database_sync_to_async(view, thread_sensitive=False)
    in_turn = sync_to_async(view)  # as Django runs a synchronous view

    @wraps(view)
    async def concurrent(request, *args, **kwargs) -> HttpResponseBase:
        run = on_the_pool if settings.PARLEY_CONCURRENT_VIEWS else in_turn
        return await run(request, *args, **kwargs)

    return concurrent
