"""A person's persona library: reads scoped to the owner, and saving one."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from apps.accounts.models import Persona

MAX_PERSONA_CHARS = 20_000


def personas_for_user(*, user) -> QuerySet[Persona]:
    if not user.is_authenticated:
        return Persona.objects.none()
    return Persona.objects.filter(owner=user)


def persona_save(*, owner, name: str, text: str) -> Persona:
    """Add a persona, or replace the text of the owner's persona of that name."""
    # NUL is the one character a form can carry that PostgreSQL cannot store.
    name = " ".join((name or "").replace("\x00", "").split())
    text = (text or "").replace("\x00", "").strip()
    errors = {}
    if not name:
        errors["name"] = "Give the persona a name."
    elif len(name) > 80:
        errors["name"] = f"A persona name holds at most 80 characters, not {len(name)}."
    if not text:
        errors["text"] = "Write who you are for the roles: the persona text is empty."
    elif len(text) > MAX_PERSONA_CHARS:
        errors["text"] = (
            f"A persona holds at most {MAX_PERSONA_CHARS:,} characters, not {len(text):,}."
        )
    if errors:
        raise ValidationError(errors)
    persona, _ = Persona.objects.update_or_create(owner=owner, name=name, defaults={"text": text})
    return persona
