"""Writes for roles."""

from __future__ import annotations

import colorsys
import hashlib
import re
from dataclasses import dataclass, field
from typing import IO

from anyascii import anyascii
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from apps.ops.storage import delete_unused
from apps.roles.cards import MAX_CARD_FILE_BYTES, Card, CardError, read_card
from apps.roles.defaults import ASSISTANT
from apps.roles.models import LoreEntry, Role, RoleGroup
from apps.roles.role_packs import (
    RESERVED_HANDLES,
    PackReport,
    apply_pack,
    pack_path,
    read_pack,
)
from apps.roles.selectors import imported_voice_role, roles_offered

MAX_CARDS_AT_ONCE = 200


def role_ensure_default() -> Role:
    """Return the default role, creating the built-in assistant when no role is default."""
    role = Role.objects.filter(is_default=True).first()
    if role is not None:
        return role
    fields = {key: value for key, value in ASSISTANT.items() if key != "handle"}
    role, _ = Role.objects.update_or_create(owner=None, handle=ASSISTANT["handle"], defaults=fields)
    return role


def role_pack_load(name_or_path: str) -> PackReport:
    """Load a shipped pack by slug, or a YAML file, creating or updating its roles and groups."""
    path = pack_path(name_or_path)
    data = read_pack(path.read_text(encoding="utf-8"), source=path.name)
    return role_pack_apply(data)


def role_pack_apply(data: dict) -> PackReport:
    with transaction.atomic():
        return apply_pack(data, Role=Role, RoleGroup=RoleGroup)


def free_handle(wanted: str, *, owner) -> str:
    """A valid handle from any name ("GPT-4o" → "gpt-4o", "月纱" → "yuesha"), numbered when
    one of the roles `owner` may use has it ("gpt-4o-2"). Another person's own roles are not
    looked at: a number never tells that someone else has a role of that name."""
    spelled = re.sub(r":[a-z0-9_+-]+:", " ", anyascii(wanted))  # an emoji's spelled-out name
    base = re.sub(r"[^a-z0-9_-]+", "-", spelled.lower()).strip("-_")[:34] or "role"
    if not base[0].isalpha():
        base = ("r-" + base)[:34]
    if base in RESERVED_HANDLES:
        base += "-role"
    taken = set(
        roles_offered(owner).filter(handle__startswith=base).values_list("handle", flat=True)
    ) | set(RoleGroup.objects.filter(handle__startswith=base).values_list("handle", flat=True))
    if base not in taken:
        return base
    return next(f"{base}-{n}" for n in range(2, 10_000) if f"{base}-{n}" not in taken)


def colour_for(name: str) -> str:
    """A steady, readable colour for a name (the same name, the same colour)."""
    hue = int(hashlib.sha256(name.encode()).hexdigest()[:4], 16) % 360
    red, green, blue = colorsys.hls_to_rgb(hue / 360, 0.42, 0.55)
    return "#{:02x}{:02x}{:02x}".format(*(round(c * 255) for c in (red, green, blue)))


def role_for_imported_voice(*, owner, voice: str, source: str) -> Role:
    """The owner's role for a voice of an imported chat (a model, a Parley role): the one an
    earlier import made, else a new one named after it."""
    existing = imported_voice_role(owner, voice)
    if existing is not None:
        return existing
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction goes on
            return Role.objects.create(
                owner=owner,
                handle=free_handle(voice, owner=owner),
                display_name=voice[:80] or "Imported assistant",
                description=f"Answered as {voice} in {source}."[:200],
                colour=colour_for(voice),
                card={"imported_voice": voice},
            )
    except IntegrityError:
        # Two imports of the person's made the same voice's role at once: theirs won.
        existing = imported_voice_role(owner, voice)
        if existing is None:
            raise
        return existing


def role_from_card(*, owner, card: Card, pack: str = "") -> Role:
    """A role of `owner`'s from a character card: its name and handle, the persona built from
    the card, its picture as the avatar, the creator's notes kept for people."""
    avatar_path = ""
    if card.picture:
        digest = hashlib.sha256(card.picture).hexdigest()
        avatar_path = f"{AVATARS_FOLDER}{digest}.png"
        if not default_storage.exists(avatar_path):
            default_storage.save(avatar_path, ContentFile(card.picture))
    card_fields = {"character": card.kept, "extensions": card.extensions}
    if card.lorebook.entries or any(card.lorebook.settings.values()):
        card_fields["lorebook"] = card.lorebook.settings
    for attempt in range(3):  # another of the person's imports may take the handle first
        try:
            with transaction.atomic():
                role = _role_of_card(owner, card, card_fields, avatar_path, pack)
                LoreEntry.objects.bulk_create(
                    LoreEntry(role=role, **entry) for entry in card.lorebook.entries
                )
                return role
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _role_of_card(owner, card: Card, card_fields: dict, avatar_path: str, pack: str) -> Role:
    return Role.objects.create(
        owner=owner,
        handle=free_handle(card.name, owner=owner),
        display_name=card.name,
        description=card.description,
        persona=card.persona,
        notes=card.notes,
        colour=card.colour or colour_for(card.name),
        icon=card.icon or (card.name[:1].upper() if card.name[:1].isalpha() else "✦"),
        avatar=avatar_path,
        pack=pack,
        output_rules=card.output_rules,
        answers_last=card.answers_last,
        can_write=card.can_write,
        card=card_fields,
    )


def roles_from_cards(
    *, owner, files: list[tuple[str, bytes | IO[bytes]]], pack: str = ""
) -> CardsReport:
    """Every card of a folder (or a handful of files) as roles; a file that is not a card is
    reported by name and the others are still made. With `pack`, they form a role pack. An
    uploaded file is read when its turn comes, so one card at a time is in memory."""
    if len(files) > MAX_CARDS_AT_ONCE:
        raise ValidationError(f"At most {MAX_CARDS_AT_ONCE} cards at once.")
    slug = slugify(pack)[:60]
    report = CardsReport()
    for name, content in files:
        try:
            data = content if isinstance(content, bytes) else content.read(MAX_CARD_FILE_BYTES + 1)
            card = read_card(data, name)
        except CardError as exc:
            report.refused.append(str(exc))
            continue
        report.made.append(role_from_card(owner=owner, card=card, pack=slug))
    return report


@dataclass
class CardsReport:
    made: list[Role] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def lorebook_save(*, role: Role, formset, settings: dict) -> None:
    """A person's edit of their role's lorebook: its entries (added, changed, deleted) and
    how they are chosen, kept in the card so an export carries them."""
    with transaction.atomic():
        for entry in formset.save(commit=False):
            entry.role = role
            entry.save()
        for entry in formset.deleted_objects:
            entry.delete()
        book = {**((role.card or {}).get("lorebook") or {})}
        book.update(
            {key: value or 0 for key, value in settings.items() if key != "recursive_scanning"}
        )
        book["recursive_scanning"] = bool(settings.get("recursive_scanning"))
        role.card = {**(role.card or {}), "lorebook": book}
        role.save(update_fields=["card"])


def role_delete(*, role: Role, by) -> None:
    """A person deletes a role of their own (everyone's roles are the admin's to change)."""
    if role.owner_id != by.pk:
        raise ValidationError("Only your own roles can be deleted here.")
    role.delete()


AVATARS_FOLDER = "avatars/"


def avatars_sweep() -> int:
    """Delete the avatars no role shows any more (its roles were deleted); how many went."""
    shown = set(Role.objects.exclude(avatar="").values_list("avatar", flat=True))
    return delete_unused(AVATARS_FOLDER, shown.__contains__)
