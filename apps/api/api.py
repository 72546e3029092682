"""The `/api/v1/` NinjaAPI: token auth, throttles, and JSON errors a script can act on."""

from __future__ import annotations

import math

from django.conf import settings
from django.core.exceptions import (
    PermissionDenied,
    RequestDataTooBig,
    TooManyFilesSent,
    ValidationError,
)
from django.http import Http404
from django.http.multipartparser import MultiPartParserError
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, Throttled
from ninja.errors import ValidationError as SchemaError
from ninja.parser import Parser

from apps.api.auth import TokenAuth
from apps.api.endpoints import router
from apps.api.import_endpoints import router as import_router
from apps.api.library_endpoints import router as library_router
from apps.api.limits import TokenRateThrottle
from apps.api.stream import router as stream_router
from apps.chat.records.attachments import MAX_FILES_AT_ONCE


class NotAnObject(ValueError):
    pass


class ObjectParser(Parser):
    """Every body the API takes is a JSON object: a list or a bare value is refused, not read
    as an empty object (`[null, null]` made a session)."""

    def parse_body(self, request):
        data = super().parse_body(request)
        if not isinstance(data, dict):
            raise NotAnObject("The body must be a JSON object.")
        return data


api = NinjaAPI(
    parser=ObjectParser(),
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
api.add_router("/", import_router)
api.add_router("/", library_router)


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


# Clearer words than the schema validator's for the mistakes people make most.
PLAIN_WORDS = {
    ("text", "string_too_short"): "Write something before sending.",
    ("text", "string_pattern_mismatch"): "Write something before sending.",
    ("roles", "string_pattern_mismatch"): "A role handle is letters, digits, - and _ only.",
}


@api.exception_handler(SchemaError)
def bad_schema(request, exc: SchemaError):
    first = exc.errors[0] if exc.errors else {}
    location = [part for part in first.get("loc", ()) if part not in ("body", "query")]
    names = [str(part) for part in location if not isinstance(part, int)]
    field = names[-1] if names else None
    detail = PLAIN_WORDS.get((field or "", first.get("type", "")))
    return _error(request, 400, detail or str(first.get("msg", "The request is not valid.")), field)


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    field = getattr(exc, "field", None)
    if exc.status_code == 400 and exc.message.startswith("Cannot parse request body"):
        cause = exc.__cause__
        detail = str(cause) if isinstance(cause, NotAnObject) else "The body is not valid JSON."
        return _error(request, 400, detail, "body")
    return _error(request, exc.status_code, exc.message, field)


@api.exception_handler(RequestDataTooBig)
def too_big(request, exc: RequestDataTooBig):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(request, 413, f"The body is over the limit of {limit:,} bytes.", "body")


@api.exception_handler(TooManyFilesSent)
def too_many_files(request, exc: TooManyFilesSent):
    return _error(request, 422, f"Attach at most {MAX_FILES_AT_ONCE} files at once.", "files")


@api.exception_handler(MultiPartParserError)
def not_multipart(request, exc: MultiPartParserError):
    return _error(request, 400, f"The body is not valid multipart/form-data ({exc}).", "body")


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
