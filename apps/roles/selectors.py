"""Read access to roles."""

from __future__ import annotations

from apps.roles.models import Role


def roles_by_handle(handles: set[str] | None = None) -> dict[str, Role]:
    """Roles keyed by handle, optionally limited to `handles` (one query)."""
    queryset = Role.objects.all()
    if handles is not None:
        queryset = queryset.filter(handle__in=handles)
    return {role.handle: role for role in queryset}


def default_roles() -> list[Role]:
    """The roles a new session starts with."""
    return list(Role.objects.all())
