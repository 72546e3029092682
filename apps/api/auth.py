"""Bearer-token authentication for the API, and the scope a write needs."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from ninja.security import HttpBearer

from apps.api.tokens import token_authenticate


class TokenAuth(HttpBearer):
    """`Authorization: Bearer pat_…`: the call acts as the token's user."""

    def authenticate(self, request, token: str):
        found = token_authenticate(token)
        if found is None:
            return None  # 401
        request.user = found.user
        return found


def require_post_scope(request) -> None:
    if not request.auth.can_post:
        raise PermissionDenied("This token may only read: make one with read and post.")
