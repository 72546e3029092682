"""Middleware that runs in Django's async chain under daphne.

One middleware that can only run synchronously turns the whole chain synchronous: every
request then holds the one thread Django keeps for synchronous code until its view returns,
and concurrent views queue behind each other. Both of Parley's own can run either way.
"""

from __future__ import annotations

import logging

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpResponse
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError
from whitenoise.middleware import WhiteNoiseMiddleware

logger = logging.getLogger(__name__)
UNAVAILABLE = (
    "Parley cannot reach its message service (Redis) right now. Nothing was lost; "
    "try again in a moment."
)


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise (static files with far-future caching), able to run in the async chain."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        super().__init__(get_response)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request):
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(
                request.path_info
            )
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
        return await self.get_response(request)


class ServiceUnavailableMiddleware:
    """Redis or the broker away: a clear 503 "try again", never a 500."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        return self.get_response(request)

    async def __acall__(self, request):
        return await self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, RedisError | OperationalError):
            logger.warning("%s %s: Redis unavailable (%s)", request.method, request.path, exception)
            response = HttpResponse(UNAVAILABLE, status=503, content_type="text/plain")
            response["Retry-After"] = "5"
            return response
        return None
