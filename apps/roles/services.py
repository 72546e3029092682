"""Writes for roles."""

from __future__ import annotations

from apps.roles.defaults import ASSISTANT
from apps.roles.models import Role


def role_ensure_default() -> Role:
    """Return the default role, creating the built-in assistant when no role is default."""
    role = Role.objects.filter(is_default=True).first()
    if role is not None:
        return role
    fields = {key: value for key, value in ASSISTANT.items() if key != "handle"}
    role, _ = Role.objects.update_or_create(handle=ASSISTANT["handle"], defaults=fields)
    return role
