"""The account page's API tokens: make one (shown once), see when each was used, revoke."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from apps.api import tokens
from apps.api.models import AccessToken, TokenScope


@require_http_methods(["GET", "POST"])
def token_list(request):
    made, error = None, ""
    if request.method == "POST":
        try:
            token, raw = tokens.token_create(
                user=request.user,
                name=request.POST.get("name", ""),
                scope=request.POST.get("scope", TokenScope.READ),
            )
            made = {"token": token, "raw": raw}
        except ValidationError as exc:
            error = " ".join(exc.messages)
    rows = AccessToken.objects.filter(user=request.user)
    return render(
        request,
        "api/tokens.html",
        {"tokens": rows, "made": made, "error": error, "scopes": TokenScope.choices},
        status=422 if error else 200,
    )


@require_POST
def token_revoke(request, token):
    tokens.token_revoke(token=get_object_or_404(AccessToken, pk=token, user=request.user))
    return redirect("api_tokens:token_list")
