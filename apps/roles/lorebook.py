"""Lorebooks (a card's `character_book`, SillyTavern's World Info): read from an untrusted
card, chosen for a reply, and written back into a card. No database here.

A reply's role scans the last messages it sees (`scan_depth`) for each enabled entry's keys;
the entries found, with the constant ones, go into its context in insertion order. When they
are over the book's token budget, the lowest priority is left out first. Keys match as words
("sun" is not in "sunday"), ignoring case unless the entry says otherwise; a key is text, never
a pattern (a hostile card's regular expression could take the worker's time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from apps.attachments.text import storable

DEFAULT_SCAN_DEPTH = 4
MAX_SCAN_DEPTH = 50
DEFAULT_TOKEN_BUDGET = 1024
MAX_TOKEN_BUDGET = 8192
MAX_ENTRIES = 500
MAX_KEYS = 50
MAX_KEY_CHARS = 200
MAX_CONTENT_CHARS = 20_000
# Entries found in other entries' content (a book that says `recursive_scanning`): how many
# passes, so two entries naming each other cannot loop.
MAX_RECURSION = 3
# The book's own fields Parley keeps and writes back.
BOOK_FIELDS = ("name", "description", "scan_depth", "token_budget", "recursive_scanning",
               "extensions")  # fmt: skip
ENTRY_FIELDS = ("keys", "secondary_keys", "selective", "content", "enabled", "constant",
                "case_sensitive", "insertion_order", "priority", "comment")  # fmt: skip


@dataclass
class Lore:
    """One entry as the selection sees it."""

    content: str
    keys: list[str] = field(default_factory=list)
    secondary_keys: list[str] = field(default_factory=list)
    selective: bool = False
    constant: bool = False
    case_sensitive: bool = False
    insertion_order: int = 100
    priority: int = 10
    name: str = ""


@dataclass
class Book:
    """A card's lorebook: its settings and its entries (each a dict of LoreEntry's fields)."""

    settings: dict[str, Any] = field(default_factory=dict)
    entries: list[dict[str, Any]] = field(default_factory=list)


def read_book(value: Any) -> Book:
    """A card's `character_book`, bounded and typed (anything malformed is left out)."""
    if not isinstance(value, dict):
        return Book()
    settings = {key: value[key] for key in BOOK_FIELDS if key in value}
    settings = {
        "name": _text(settings.get("name"), 200),
        "description": _text(settings.get("description"), 2000),
        "scan_depth": _number(settings.get("scan_depth"), 0, MAX_SCAN_DEPTH),
        "token_budget": _number(settings.get("token_budget"), 0, MAX_TOKEN_BUDGET),
        "recursive_scanning": settings.get("recursive_scanning") is True,
        "extensions": settings.get("extensions") if isinstance(settings.get("extensions"), dict)
        else {},
    }  # fmt: skip
    entries = []
    raw = value.get("entries")
    for item in raw[:MAX_ENTRIES] if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        content = _text(item.get("content"), MAX_CONTENT_CHARS)
        if not content.strip():
            continue
        entries.append({
            "name": _text(item.get("comment") or item.get("name"), 200),
            "keys": _keys(item.get("keys")),
            "secondary_keys": _keys(item.get("secondary_keys")),
            "selective": item.get("selective") is True,
            "content": content,
            "enabled": item.get("enabled") is not False,
            "constant": item.get("constant") is True,
            "case_sensitive": item.get("case_sensitive") is True,
            "insertion_order": _number(item.get("insertion_order"), -10**6, 10**6, 100),
            "priority": _number(item.get("priority"), -10**6, 10**6, 10),
            "kept": {key: item[key] for key in item if key not in (*ENTRY_FIELDS, "name")
                     and _plain(item[key])},
        })  # fmt: skip
    return Book(settings=settings, entries=entries)


def book_document(settings: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The lorebook as a V2/V3 card's `character_book`."""
    document: dict[str, Any] = {
        "name": settings.get("name", ""),
        "description": settings.get("description", ""),
        "recursive_scanning": bool(settings.get("recursive_scanning")),
        "extensions": settings.get("extensions") or {},
        "entries": [],
    }
    for key in ("scan_depth", "token_budget"):
        if settings.get(key):
            document[key] = settings[key]
    for position, entry in enumerate(entries):
        document["entries"].append({
            "use_regex": False, "position": "before_char",  # V3 requires them; V2 has position
            **(entry.get("kept") or {}),
            "keys": entry["keys"], "secondary_keys": entry["secondary_keys"],
            "comment": entry["name"], "content": entry["content"],
            "enabled": entry["enabled"], "constant": entry["constant"],
            "selective": entry["selective"], "case_sensitive": entry["case_sensitive"],
            "insertion_order": entry["insertion_order"], "priority": entry["priority"],
            "extensions": (entry.get("kept") or {}).get("extensions", {}),
            "id": (entry.get("kept") or {}).get("id", position),
        })  # fmt: skip
    return document


def lore_for(
    entries: list[Lore], recent: list[str], *, budget: int, recursive: bool = False
) -> list[Lore]:
    """The entries the recent messages bring in (and the constant ones), in insertion order,
    within `budget` tokens (about four characters each): over it, the lowest priority (then
    the latest in order) is left out first."""
    chosen: list[Lore] = [entry for entry in entries if entry.constant]
    waiting = [entry for entry in entries if not entry.constant]
    scanned = "\n".join(recent)
    for _ in range(MAX_RECURSION if recursive else 1):
        found = [entry for entry in waiting if _said(entry, scanned)]
        if not found:
            break
        chosen += found
        waiting = [entry for entry in waiting if entry not in found]
        scanned = "\n".join(entry.content for entry in found)
    ranked = sorted(chosen, key=lambda e: (-e.priority, e.insertion_order))
    kept, used = [], 0
    for entry in ranked:
        cost = len(entry.content) // 4 + 1
        if used + cost <= budget:
            kept.append(entry)
            used += cost
    return sorted(kept, key=lambda entry: entry.insertion_order)


def lore_block(entries: list[Lore]) -> str:
    """The entries as the cue's paragraph the role reads."""
    if not entries:
        return ""
    lines = [entry.content.strip() for entry in entries]
    return "What you know about what was just mentioned (your lorebook):\n\n" + "\n\n".join(lines)


def _said(entry: Lore, text: str) -> bool:
    if not any(_matches(key, text, entry.case_sensitive) for key in entry.keys):
        return False
    if entry.selective and entry.secondary_keys:
        return any(_matches(key, text, entry.case_sensitive) for key in entry.secondary_keys)
    return True


def _matches(key: str, text: str, case_sensitive: bool) -> bool:
    key = key.strip()
    if not key:
        return False
    pattern = re.escape(key)
    if key[0].isalnum() or key[0] == "_":
        pattern = r"(?<!\w)" + pattern
    if key[-1].isalnum() or key[-1] == "_":
        pattern += r"(?!\w)"
    return re.search(pattern, text, 0 if case_sensitive else re.IGNORECASE) is not None


def _keys(value: Any) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return []
    keys = [_text(key, MAX_KEY_CHARS).strip() for key in value[:MAX_KEYS] if isinstance(key, str)]
    return [key for key in keys if key]


def _text(value: Any, limit: int) -> str:
    return storable(value if isinstance(value, str) else "")[:limit]


def _number(value: Any, low: int, high: int, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return default  # not a number (NaN included)
    return int(min(max(value, low), high))


def _plain(value: Any, depth: int = 0) -> bool:
    """Small JSON only (a kept field is written back as it came)."""
    if depth > 8:
        return False
    if isinstance(value, str):
        return len(value) <= 10_000
    if isinstance(value, bool | int | float) or value is None:
        return True
    if isinstance(value, list):
        return len(value) <= 100 and all(_plain(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return len(value) <= 100 and all(
            isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items()
        )
    return False
