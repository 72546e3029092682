"""Thin views: a user's MCP servers — add a streamable HTTP one, test, delete."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.connectors import services
from apps.connectors.client import McpUnavailable
from apps.connectors.selectors import owned_servers, servers_for_user


def server_list(request):
    """GET lists the servers this user may use; POST adds one of their own (HTTP)."""
    error, values = "", {}
    if request.method == "POST":
        values = {key: request.POST.get(key, "") for key in ("name", "url", "headers")}
        try:
            services.server_save_http(
                owner=request.user, name=values["name"], url=values["url"],
                headers_text=values["headers"],
            )  # fmt: skip
            return redirect("connectors:server_list")
        except ValidationError as exc:
            error = " ".join(exc.messages)
    context = {
        "servers": servers_for_user(user=request.user),
        "error": error,
        "values": values,
    }
    return render(request, "connectors/server_list.html", context, status=422 if error else 200)


@require_POST
def server_test(request, server):
    """Connect and list the server's tools; the page shows them or why it failed."""
    server = get_object_or_404(servers_for_user(user=request.user), public_id=server)
    try:
        tools, error = services.server_test(server=server), ""
    except (McpUnavailable, ValidationError) as exc:
        tools, error = [], " ".join(getattr(exc, "messages", [str(exc)]))
    context = {"server": server, "tools": tools, "error": error}
    return render(request, "connectors/_test_result.html", context)


@require_POST
def server_delete(request, server):
    server = get_object_or_404(owned_servers(user=request.user), public_id=server)
    server.delete()
    return redirect("connectors:server_list")
