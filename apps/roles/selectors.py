"""Read access to roles."""

from __future__ import annotations

from django.conf import settings

from apps.roles.models import Role, RoleGroup


def roles_by_handle(handles: set[str] | None = None) -> dict[str, Role]:
    """Roles keyed by handle, optionally limited to `handles` (one query)."""
    queryset = Role.objects.all()
    if handles is not None:
        queryset = queryset.filter(handle__in=handles)
    return {role.handle: role for role in queryset}


def default_roles() -> list[Role]:
    """The roles a new session starts with: the default pack, plus the default role."""
    roles = Role.objects.filter(pack=settings.PARLEY_DEFAULT_ROLE_PACK) | Role.objects.filter(
        is_default=True
    )
    return list(roles.distinct())


def group_members() -> dict[str, list[str]]:
    """Every role group's handle with its members' handles, for routing."""
    groups: dict[str, list[str]] = {}
    for group in RoleGroup.objects.prefetch_related("members"):
        groups[group.handle] = [role.handle for role in group.members.all()]
    return groups
