"""Answers for requests that meet a missing service rather than a bug."""

from __future__ import annotations

import logging

from django.http import HttpResponse
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)
UNAVAILABLE = (
    "Parley cannot reach its message service (Redis) right now. Nothing was lost; "
    "try again in a moment."
)


class ServiceUnavailableMiddleware:
    """Redis or the broker away: a clear 503 "try again", never a 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, RedisError | OperationalError):
            logger.warning("%s %s: Redis unavailable (%s)", request.method, request.path, exception)
            response = HttpResponse(UNAVAILABLE, status=503, content_type="text/plain")
            response["Retry-After"] = "5"
            return response
        return None
