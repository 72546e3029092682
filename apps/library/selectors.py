"""Reads of a session's library."""

from __future__ import annotations

from django.db.models import Sum

from apps.library.models import Document


def library_bytes(*, session_id: int) -> int:
    """What the session's library documents take in its storage (counted in its quota)."""
    return Document.objects.filter(session_id=session_id).aggregate(total=Sum("size"))["total"] or 0


def stored_name(document: Document) -> str:
    """Where its bytes are kept (in the default storage): one file per session and content."""
    return f"library/{document.session_id}/{document.sha256}"
