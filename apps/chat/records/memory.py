"""Session memory as text or as a JSON document (the memory editor's Advanced view).

The roles always read the memory as text; a memory that is a JSON object stays one when a
role appends a note (it goes into the object's "notes" list)."""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError

NOTES_KEY = "notes"


def memory_document(memory: str) -> dict | list | None:
    """The memory as a JSON object or array, or None when it is plain text."""
    try:
        value = json.loads(memory)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) else None


def memory_from_json(text: str) -> str:
    """Validate JSON typed in the Advanced view; the memory stores it pretty-printed."""
    if not text.strip():
        return ""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"The memory is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from None
    if not isinstance(value, (dict, list)):
        raise ValidationError("The memory in JSON is an object { … } or a list [ … ].")
    return json.dumps(value, indent=2, ensure_ascii=False)


def memory_append(memory: str, note: str) -> str:
    """The memory with `note` added: a line of text, or an entry of a JSON memory's notes."""
    document = memory_document(memory)
    if isinstance(document, dict):
        notes = document.get(NOTES_KEY)
        document[NOTES_KEY] = [*notes, note] if isinstance(notes, list) else [note]
        return json.dumps(document, indent=2, ensure_ascii=False)
    if isinstance(document, list):
        return json.dumps([*document, note], indent=2, ensure_ascii=False)
    return f"{memory}\n{note}".strip()
