"""The `/api/v1/` NinjaAPI: token auth, throttles, and JSON errors a script can act on."""

from __future__ import annotations

import math

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, Throttled
from ninja.errors import ValidationError as SchemaError

from apps.api.auth import TokenAuth
from apps.api.endpoints import router
from apps.api.limits import TokenRateThrottle
from apps.api.stream import router as stream_router

api = NinjaAPI(
    title="Parley API",
    version="1",
    description="Sessions, threads, messages and live streams of Parley, with a personal "
    "access token (`Authorization: Bearer pat_…`; make one under Account → API tokens).",
    auth=TokenAuth(),
    throttle=[TokenRateThrottle(settings.PARLEY_API_RATE)],
    openapi_url="/schema",
    docs_url="/docs",
    urls_namespace="api",
)
api.add_router("/", router)
api.add_router("/", stream_router)


def _error(request, status: int, detail: str, field: str | None = None, **headers):
    response = api.create_response(request, {"detail": detail, "field": field}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


@api.exception_handler(ValidationError)
def bad_input(request, exc: ValidationError):
    if hasattr(exc, "error_dict"):
        field, errors = next(iter(exc.message_dict.items()))
        return _error(request, 400, " ".join(errors), None if field == "__all__" else field)
    return _error(request, 400, " ".join(exc.messages))


@api.exception_handler(SchemaError)
def bad_schema(request, exc: SchemaError):
    first = exc.errors[0] if exc.errors else {}
    location = [str(part) for part in first.get("loc", ()) if part not in ("body", "query")]
    field = location[-1] if location else None
    return _error(request, 400, str(first.get("msg", "The request is not valid.")), field)


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    return _error(request, exc.status_code, exc.message)


@api.exception_handler(Http404)
def not_found(request, exc):
    return _error(request, 404, "Not found (or not yours).")


@api.exception_handler(PermissionDenied)
def refused(request, exc: PermissionDenied):
    return _error(request, 403, str(exc) or "Not allowed.")


@api.exception_handler(AuthenticationError)
def unauthenticated(request, exc):
    return _error(
        request, 401, "Give a valid token: Authorization: Bearer pat_… (revoked ones fail).",
        **{"WWW-Authenticate": "Bearer"},
    )  # fmt: skip


@api.exception_handler(Throttled)
def throttled(request, exc: Throttled):
    wait = max(1, math.ceil(exc.wait or 1))
    return _error(
        request, 429, f"Too many requests: try again in {wait} s.", **{"Retry-After": str(wait)}
    )
