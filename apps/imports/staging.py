"""Where an upload waits until it is read, whichever machine receives its pieces and whichever
worker reads it: the "imports" storage. In a folder, the pieces are written into the file
itself, and a worker reads that file where it lies. In a bucket of object storage, each piece
is an object of its own (beside the file's name, under ".parts/"), and a worker joins them into
a copy on its own disk for the time of one read; the child process that reads an export needs
a file."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage

from apps.imports.models import import_storage
from apps.ops.storage import delete_all, files_under

PARTS = ".parts/"
CHUNK = 1024 * 1024
SPOOL_BYTES = 1024 * 1024  # a piece (8 MB at most) waits in memory up to this, then on disk


def _on_disk() -> bool:
    return isinstance(import_storage(), FileSystemStorage)


def begin(name: str) -> str:
    """Make room for an upload that will arrive in pieces; the name it is kept under."""
    if _on_disk():
        return import_storage().save(name, ContentFile(b""))
    return name  # its pieces are its objects: nothing to make yet


def append(name: str, offset: int, copy: Callable[[object], int]) -> int:
    """Keep the piece that starts at `offset`: `copy(out)` writes it (checking it as it goes)
    and says how many bytes it wrote. A piece sent again replaces the one it was."""
    storage = import_storage()
    if _on_disk():
        with open(storage.path(name), "r+b") as out:
            out.truncate(offset)  # what a failed earlier attempt left past it
            out.seek(offset)
            return copy(out)
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as out:
        written = copy(out)
        if written:
            out.seek(0)
            part = f"{name}{PARTS}{offset:015d}"
            storage.save(part, File(out, name=part))
    return written


@contextlib.contextmanager
def local_file(name: str) -> Iterator[Path]:
    """The upload as a file on this machine, for one read."""
    storage = import_storage()
    if _on_disk():
        yield Path(storage.path(name))
        return
    folder = Path(settings.VAR_DIR) / "import-copies"
    folder.mkdir(parents=True, exist_ok=True)
    handle, raw = tempfile.mkstemp(dir=folder, suffix=Path(name).suffix)
    path = Path(raw)
    try:
        with os.fdopen(handle, "wb") as out:
            parts = sorted(files_under(f"{name}{PARTS}", storage))
            for stored in parts or [name]:  # pieces in order, or the file sent whole
                with storage.open(stored, "rb") as read:
                    shutil.copyfileobj(read, out, CHUNK)
        yield path
    finally:
        path.unlink(missing_ok=True)


def discard(name: str) -> None:
    """The upload and its pieces are no longer needed."""
    storage = import_storage()
    with contextlib.suppress(FileNotFoundError):
        storage.delete(name)
    if not _on_disk():
        delete_all(f"{name}{PARTS}", storage)


def named_by(names: set[str]) -> Callable[[str], bool]:
    """Whether a stored name is one of `names`, or a piece of one."""
    return lambda stored: stored.partition(PARTS)[0] in names
