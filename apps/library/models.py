"""A session's library: its documents, and each document's chunks as search finds them.

The chunks' full-text index is the database's own engine, outside Django's models: SQLite's
FTS5 table `library_chunk_fts` (kept in step by triggers) and PostgreSQL's generated
`search` column with its GIN index (migration 0002). Search is in `apps.library.search`.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class DocumentState(models.TextChoices):
    QUEUED = "queued", "Waiting to be read"
    INDEXING = "indexing", "Being read"
    READY = "ready", "Ready"
    FAILED = "failed", "Could not be read"


class Document(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    session = models.ForeignKey(
        "chat.Session", on_delete=models.CASCADE, related_name="library_documents"
    )
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    name = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64)
    state = models.CharField(
        max_length=10, choices=DocumentState.choices, default=DocumentState.QUEUED
    )
    error = models.TextField(blank=True)
    pages = models.PositiveIntegerField(null=True, blank=True)
    chunks_count = models.PositiveIntegerField(default=0)
    # Its passages' vectors: whose (`local:all-MiniLM-L6-v2`, `openai:text-embedding-3-small`;
    # empty: none), how many are done (the panel's progress), and why the embedded model's
    # were taken instead of the provider's, if they were.
    embedder = models.CharField(max_length=120, blank=True)
    vectors_done = models.PositiveIntegerField(default=0)
    vectors_note = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            # The same bytes twice in one library would answer every question twice.
            models.UniqueConstraint(fields=["session", "sha256"], name="library_document_once")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def embedding(self) -> bool:
        """Ready for full-text search, its vectors still being made."""
        return (
            self.state == DocumentState.READY
            and bool(self.embedder)
            and self.vectors_done < self.chunks_count
        )


class Chunk(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    seq = models.PositiveIntegerField()  # its place in the document, from 0
    text = models.TextField()
    page = models.PositiveIntegerField(null=True, blank=True)
    heading = models.CharField(max_length=500, blank=True)
    start = models.PositiveIntegerField()  # its character range in the document's text
    end = models.PositiveIntegerField()
    vector = models.BinaryField(null=True, blank=True)  # float32, unit length, its embedder's

    class Meta:
        ordering = ["document", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["document", "seq"], name="library_chunk_place")
        ]

    def __str__(self) -> str:
        return f"{self.document} #{self.seq}"
