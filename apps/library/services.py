"""Writes for a session's library: a document read into chunks (in one transaction, and
searchable by its words from then on), then its passages given vectors, a batch at a time."""

from __future__ import annotations

import hashlib
import logging

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.library.chunking import chunks_of
from apps.library.extraction import Unreadable, extract
from apps.library.models import Chunk, Document, DocumentState

logger = logging.getLogger(__name__)


class AlreadyThere(ValueError):
    """The same bytes are in this library already."""


def document_create(*, session, by, name: str, data: bytes) -> Document:
    """A document waiting to be read; AlreadyThere when its bytes are in the library."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        with transaction.atomic():
            return Document.objects.create(
                session=session, added_by=by, name=name[:255], size=len(data), sha256=digest
            )
    except IntegrityError:
        raise AlreadyThere(f"“{name}” is in this library already.") from None


def document_index(*, document: Document, data: bytes) -> Document:
    """Read the document into its chunks (those of an earlier reading are replaced), then
    give them vectors; a file that cannot be read ends FAILED with the reason, never as an
    empty document."""
    Document.objects.filter(pk=document.pk).update(state=DocumentState.INDEXING, error="")
    try:
        sections = extract(document.name, data)
    except Unreadable as exc:
        Document.objects.filter(pk=document.pk).update(state=DocumentState.FAILED, error=str(exc))
        document.refresh_from_db()
        return document
    chunks = chunks_of(sections)
    pages = max((section.page or 0 for section in sections), default=0) or None
    # numpy and the model load only in a process that reads a document, off the live path.
    from apps.library.minilm import ModelMissing
    from apps.library.vectors import document_embed, embedder_for

    embedder = embedder_for(document.session)
    with transaction.atomic():
        Chunk.objects.filter(document=document).delete()
        Chunk.objects.bulk_create(
            (
                Chunk(document=document, seq=seq, text=c.text, page=c.page,
                      heading=c.heading[:500], start=c.start, end=c.end)
                for seq, c in enumerate(chunks)
            ),
            batch_size=500,
        )  # fmt: skip
        Document.objects.filter(pk=document.pk).update(
            state=DocumentState.READY, pages=pages, chunks_count=len(chunks),
            indexed_at=timezone.now(), embedder=embedder, vectors_done=0, vectors_note="",
        )  # fmt: skip
    document.refresh_from_db()
    if embedder:
        try:
            document_embed(document)
        except ModelMissing as exc:  # searched by its words alone, and the panel says why
            logger.warning("Library document %s without vectors: %s", document.pk, exc)
            Document.objects.filter(pk=document.pk).update(embedder="", vectors_note=str(exc))
        document.refresh_from_db()
    return document
