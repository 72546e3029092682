"""Reads of MCP servers, scoped to who may use them."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.connectors.models import McpServer, ServerKind


def servers_for_user(*, user) -> QuerySet[McpServer]:
    """The user's own HTTP servers and the staff-defined servers they are allowed to use."""
    allowed = Q(owner__isnull=True) & (
        Q(allowed_users=user) | Q(allowed_groups__in=user.groups.all())
    )
    return McpServer.objects.filter(Q(owner=user, kind=ServerKind.HTTP) | allowed).distinct()


def owned_servers(*, user) -> QuerySet[McpServer]:
    return McpServer.objects.filter(owner=user, kind=ServerKind.HTTP)
