"""Writes for roles."""

from __future__ import annotations

from django.db import transaction

from apps.roles.defaults import ASSISTANT
from apps.roles.models import Role, RoleGroup
from apps.roles.role_packs import PackReport, apply_pack, pack_path, read_pack


def role_ensure_default() -> Role:
    """Return the default role, creating the built-in assistant when no role is default."""
    role = Role.objects.filter(is_default=True).first()
    if role is not None:
        return role
    fields = {key: value for key, value in ASSISTANT.items() if key != "handle"}
    role, _ = Role.objects.update_or_create(handle=ASSISTANT["handle"], defaults=fields)
    return role


def role_pack_load(name_or_path: str) -> PackReport:
    """Load a shipped pack by slug, or a YAML file, creating or updating its roles and groups."""
    path = pack_path(name_or_path)
    data = read_pack(path.read_text(encoding="utf-8"), source=path.name)
    return role_pack_apply(data)


def role_pack_apply(data: dict) -> PackReport:
    with transaction.atomic():
        return apply_pack(data, Role=Role, RoleGroup=RoleGroup)
