"""Read access to roles."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Case, Q, QuerySet, When

from apps.roles.models import LoreEntry, Role, RoleGroup


def roles_by_handle(
    handles: set[str] | None, *, owner_id: int, roster: QuerySet
) -> dict[str, Role]:
    """The roles a session of `owner_id`'s names by these handles (None: every one it may
    name), one query: its roster's
    (`roster`: their ids, which may hold another person's own), else the owner's own, else
    everyone's. Handles are unique per owner only: never look one up among all roles."""
    rank = Case(When(pk__in=roster, then=0), When(owner_id=owner_id, then=1), default=2)
    found = (
        (Role.objects.all() if handles is None else Role.objects.filter(handle__in=handles))
        .filter(Q(pk__in=roster) | Q(owner_id=owner_id) | Q(owner__isnull=True))
        .annotate(rank=rank)
        .order_by("-rank")  # the better match comes later and wins
    )
    return {role.handle: role for role in found}


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


def roles_offered(user, *, also: QuerySet | list[int] | None = None) -> QuerySet[Role]:
    """The roles `user` may add to a session: everyone's, and their own (`also`: roles a
    session has already, which may be another person's own)."""
    offered = Q(owner__isnull=True) | Q(owner_id=user.pk)
    if also is not None:
        offered |= Q(pk__in=also)
    return Role.objects.filter(offered)


def imported_voice_role(user, voice: str) -> Role | None:
    """The role an earlier import made for `voice` (a model's name, a Parley role's handle)."""
    return Role.objects.filter(owner_id=user.pk, card__imported_voice=voice).first()


LORE_FIELDS = ("name", "keys", "secondary_keys", "selective", "content", "enabled", "constant",
               "case_sensitive", "insertion_order", "priority", "kept")  # fmt: skip


def lore_of(role: Role) -> list[dict]:
    """The role's lorebook entries as plain dicts, in insertion order (for its card)."""
    return list(LoreEntry.objects.filter(role=role).values(*LORE_FIELDS))
