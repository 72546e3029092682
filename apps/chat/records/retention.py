"""What a session keeps outside its rows — its attachments' bytes (and PDFs' first pages),
its library's files and its workspace folder — removed when the session goes, and the sweep
that finds what is left over: the files of sessions deleted while this could not run (a
crash between the commit and the deletion), and files no row names.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction

from apps.chat.models import Attachment, Session
from apps.library.models import Document
from apps.library.selectors import stored_name as library_name
from apps.ops.storage import delete_all, delete_unused, folders, prune_empty
from apps.workspace.files import Workspace, workspace_keys

ATTACHMENTS = "attachments/"
LIBRARY = "library/"


@dataclass(frozen=True)
class SessionFiles:
    """Where a session's bytes live: named by its public id (attachments, workspace) and by
    its primary key (library)."""

    public_id: uuid.UUID
    pk: int

    def delete(self) -> int:
        deleted = delete_all(f"{ATTACHMENTS}{self.public_id}/")
        deleted += delete_all(f"{LIBRARY}{self.pk}/")
        Workspace(self.public_id.hex, quota_bytes=0).remove()
        return deleted


def session_files_delete_on_commit(session: Session) -> None:
    """Remove the session's bytes once its deletion has committed (a rollback keeps them)."""
    files = SessionFiles(public_id=session.public_id, pk=session.pk)
    transaction.on_commit(files.delete)


def chat_files_sweep() -> int:
    """Delete what no session uses: the folders of sessions that are gone, and files no
    attachment or document names (each older than the storage sweep's grace). How many files
    went."""
    deleted = 0
    for folder in folders(ATTACHMENTS):  # one per session, by its public id
        used = _attachments_named(_uuid(folder))
        deleted += delete_unused(f"{ATTACHMENTS}{folder}/", used.__contains__)
        prune_empty(f"{ATTACHMENTS}{folder}/")
    for folder in folders(LIBRARY):  # one per session, by its primary key
        used = _documents_named(int(folder) if folder.isdigit() else None)
        deleted += delete_unused(f"{LIBRARY}{folder}/", used.__contains__)
        prune_empty(f"{LIBRARY}{folder}/")
    return deleted


def _attachments_named(session_id: uuid.UUID | None) -> set[str]:
    if session_id is None:
        return set()
    pairs = Attachment.objects.filter(session__public_id=session_id).values_list("file", "preview")
    return {name for pair in pairs for name in pair if name}


def _documents_named(session_pk: int | None) -> set[str]:
    if session_pk is None:
        return set()
    documents = Document.objects.filter(session_id=session_pk).only("session_id", "sha256")
    return {library_name(document) for document in documents}


def workspaces_sweep() -> int:
    """Remove the workspace folders of sessions that are gone; how many went."""
    keys = workspace_keys()
    alive = {
        session_id.hex
        for session_id in Session.objects.filter(
            public_id__in=[key for key in keys if _uuid(key)]
        ).values_list("public_id", flat=True)
    }
    gone = [key for key in keys if _uuid(key) and key not in alive]
    for key in gone:
        Workspace(key, quota_bytes=0).remove()
    return len(gone)


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None
