"""Role packs: YAML files of roles and groups, validated and applied idempotently.

`apply_pack` takes the model classes as arguments so the data migration that installs the
default pack can pass its historical models and share this code path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.core.exceptions import ValidationError

PACKS_DIR = Path(__file__).resolve().parent / "packs"
ROLE_FIELDS = {
    "handle": str,
    "display_name": str,
    "description": str,
    "persona": str,
    "icon": str,
    "colour": str,
    "sort_order": int,
    "is_default": bool,
    "answers_last": bool,
    "can_write": bool,
    "model_override": str,
    "output_rules": str,
}
REQUIRED_ROLE_FIELDS = ("handle", "display_name")
RESERVED_HANDLES = {"all", "user", "parley"}


@dataclass
class PackReport:
    pack: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [f"Role pack {self.pack!r}:"]
        for label, handles in (
            ("created", self.created),
            ("updated", self.updated),
            ("unchanged", self.unchanged),
        ):
            if handles:
                lines.append(f"  {label}: {', '.join('@' + h for h in handles)}")
        return lines


def shipped_packs() -> dict[str, Path]:
    """The packs that come with Parley, by slug."""
    return {path.stem: path for path in sorted(PACKS_DIR.glob("*.yaml"))}


def pack_path(name_or_path: str) -> Path:
    """A shipped pack's slug or a file path."""
    shipped = shipped_packs()
    if name_or_path in shipped:
        return shipped[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise ValidationError(
            f"No role pack {name_or_path!r}: not a file, and the shipped packs are "
            f"{', '.join(shipped)}."
        )
    return path


def read_pack(text: str, *, source: str = "the pack") -> dict:
    """Parse and validate a pack; every problem is reported with where it is."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValidationError(f"{source} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValidationError(f"{source} must be a mapping with 'pack', 'roles' and 'groups'.")
    problems: list[str] = []
    slug = data.get("pack")
    if not isinstance(slug, str) or not slug.strip():
        problems.append("'pack' must name the pack, e.g. pack: film-crew")
    roles = data.get("roles") or []
    groups = data.get("groups") or []
    if not isinstance(roles, list) or not roles:
        problems.append("'roles' must be a non-empty list")
        roles = []
    if not isinstance(groups, list):
        problems.append("'groups' must be a list")
        groups = []
    handles: list[str] = []
    for index, role in enumerate(roles, start=1):
        where = f"roles[{index}]"
        if not isinstance(role, dict):
            problems.append(f"{where} must be a mapping")
            continue
        for key in REQUIRED_ROLE_FIELDS:
            if not role.get(key):
                problems.append(f"{where} needs '{key}'")
        for key, value in role.items():
            expected = ROLE_FIELDS.get(key)
            if expected is None:
                problems.append(f"{where}: unknown field '{key}' (known: {', '.join(ROLE_FIELDS)})")
            elif not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                problems.append(f"{where}.{key} must be {expected.__name__}")
        handle = str(role.get("handle", ""))
        if handle in RESERVED_HANDLES:
            problems.append(f"{where}: @{handle} is reserved")
        if handle in handles:
            problems.append(f"{where}: @{handle} appears twice")
        handles.append(handle)
    for index, group in enumerate(groups, start=1):
        where = f"groups[{index}]"
        if not isinstance(group, dict) or not group.get("handle"):
            problems.append(f"{where} needs a 'handle'")
            continue
        if group["handle"] in RESERVED_HANDLES or group["handle"] in handles:
            problems.append(f"{where}: @{group['handle']} is reserved or names a role")
        members = group.get("members")
        if not isinstance(members, list) or not members:
            problems.append(f"{where}.members must be a non-empty list of role handles")
    if problems:
        raise ValidationError([f"{source}: {problem}" for problem in problems])
    return data


def apply_pack(data: dict, *, Role, RoleGroup) -> PackReport:
    """Create or update the pack's roles and groups; running it twice changes nothing."""
    slug = data["pack"].strip()
    report = PackReport(pack=slug)
    # A data migration passes a historical model, which may predate some fields.
    known_fields = {f.name for f in Role._meta.get_fields()}
    # A pack's roles are everyone's: a person's own role of the same handle is not one of them.
    everyones = Role.objects.filter(owner__isnull=True) if "owner" in known_fields else Role.objects
    for spec in data["roles"]:
        values = {k: v for k, v in spec.items() if k != "handle" and k in known_fields}
        values["pack"] = slug
        role = everyones.filter(handle=spec["handle"]).first()
        if role is None:
            role = Role(handle=spec["handle"], **values)
            report.created.append(role.handle)
        elif all(getattr(role, key) == value for key, value in values.items()):
            report.unchanged.append(role.handle)
            continue
        else:
            for key, value in values.items():
                setattr(role, key, value)
            report.updated.append(role.handle)
        try:
            role.full_clean()
        except ValidationError as exc:
            raise ValidationError(f"@{role.handle}: {'; '.join(exc.messages)}") from None
        role.save()
    known = set(Role.objects.values_list("handle", flat=True))
    for spec in data.get("groups") or []:
        missing = [handle for handle in spec["members"] if handle not in known]
        if missing:
            raise ValidationError(
                f"@{spec['handle']} lists unknown roles: {', '.join('@' + h for h in missing)}"
            )
        group = RoleGroup.objects.filter(handle=spec["handle"]).first()
        name = spec.get("display_name") or spec["handle"]
        members = set(spec["members"])
        if group is None:
            group = RoleGroup.objects.create(handle=spec["handle"], display_name=name, pack=slug)
            report.created.append(group.handle)
        elif (
            group.display_name == name
            and group.pack == slug
            and members == set(group.members.values_list("handle", flat=True))
        ):
            report.unchanged.append(group.handle)
            continue
        else:
            group.display_name, group.pack = name, slug
            group.save()
            report.updated.append(group.handle)
        group.members.set(everyones.filter(handle__in=members))
    return report
