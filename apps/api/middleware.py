"""The API's error contract for what Django answers before the API's own code runs: an unknown
path, a method the path does not take, a body it refused. Under `/api/v1/` every error is
JSON `{"detail", "field"}`, as the API's own errors are."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpResponse, JsonResponse

PREFIX = "/api/v1/"
DETAILS = {
    400: "The request is not valid.",
    404: "No such endpoint: see /api/v1/docs for the list.",
    413: "The body is over the size limit.",
}


def as_contract(request, response: HttpResponse) -> HttpResponse:
    if (
        response.status_code < 400
        or not request.path.startswith(PREFIX)
        or response.get("Content-Type", "").startswith("application/json")
    ):
        return response
    status = response.status_code
    if status == 405:
        allowed = response.get("Allow", "")
        detail = f"{request.method} is not allowed here" + (f": use {allowed}." if allowed else ".")
    else:
        detail = DETAILS.get(status, response.reason_phrase or "The request failed.")
    answer = JsonResponse({"detail": detail, "field": None}, status=status)
    for header in ("Allow", "Retry-After", "WWW-Authenticate"):
        if header in response:
            answer[header] = response[header]
    return answer


class ApiErrorsMiddleware:
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
        return as_contract(request, self.get_response(request))

    async def __acall__(self, request):
        return as_contract(request, await self.get_response(request))
