"""The worker's part of the library: reading a document into its chunks, off the request."""

from __future__ import annotations

from celery import shared_task
from django.core.files.storage import default_storage

from apps.library.models import Document, DocumentState
from apps.library.selectors import stored_name
from apps.library.services import document_index

INDEX_TASK = "apps.library.tasks.index_document"


@shared_task(name=INDEX_TASK, acks_late=True, ignore_result=True)
def index_document(document_id: int) -> None:
    document = Document.objects.filter(pk=document_id).first()
    if document is None:  # removed while it waited
        return
    try:
        with default_storage.open(stored_name(document), "rb") as stored:
            data = stored.read()
    except OSError:
        Document.objects.filter(pk=document_id).update(
            state=DocumentState.FAILED, error="Its file is gone from the server's storage."
        )
        return
    document_index(document=document, data=data)
