"""The preview: what importing a file would make, read from the file without writing a thing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apps.imports.layout import layout
from apps.imports.sources.reading import LABELS, read_export

EMPTY = "empty conversations (nothing in them to import)"
LISTED = 200  # conversations listed by name in the preview; the rest are counted


def scan(
    path: Path, *, imported: set[str], progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Counts, the voices that answered (each to become a role), what is skipped and why, the
    broken conversations and the first conversations by name. `imported`: the keys already
    imported by this person (they will be passed over)."""
    formats: Counter[str] = Counter()
    voices: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    broken: list[dict[str, Any]] = []
    listed: list[dict[str, Any]] = []
    totals = Counter(conversations=0, messages=0, branches=0, attachments=0, already=0)
    for entry in read_export(path):
        if progress is not None and entry.position % 50 == 0:
            progress(entry.position)
        if entry.conversation is None:
            broken.append(
                {"position": entry.position, "title": entry.title, "reason": entry.broken}
            )
            continue
        found = entry.conversation
        formats[entry.format] += 1
        if not found.messages:
            skipped[EMPTY] += 1
            continue
        if found.key in imported:
            totals["already"] += 1
            continue
        planned = layout(found)
        totals["conversations"] += 1
        totals["messages"] += len(found.messages)
        totals["branches"] += planned.branches
        totals["attachments"] += sum(len(m.files) for m in found.messages)
        skipped.update(found.skipped)
        if planned.branches_dropped:
            skipped["branches past the 200 a conversation keeps"] += planned.branches_dropped
        for message in found.messages:
            if message.speaker == "assistant":
                voices[message.speaks_as] += 1
        if len(listed) < LISTED:
            listed.append(
                {
                    "title": found.title,
                    "messages": len(found.messages),
                    "branches": planned.branches,
                    "created": found.created_at.isoformat() if found.created_at else None,
                }
            )
    return {
        "formats": [
            {"format": f, "label": LABELS[f], "conversations": n} for f, n in formats.most_common()
        ],
        **totals,
        "voices": [{"name": name, "messages": n} for name, n in voices.most_common()],
        "skipped": [{"what": what, "count": n} for what, n in skipped.most_common()],
        "broken": broken,
        "listed": listed,
    }
