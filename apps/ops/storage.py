"""Walking and pruning what Parley keeps in Django's storage (a folder on disk or a bucket of
object storage alike): the pieces the retention sweep of each app is built from."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from django.core.files.storage import FileSystemStorage, Storage, default_storage
from django.utils import timezone

# A file younger than this is never swept: the row that names it may not be committed yet
# (a save happens inside the transaction that writes its row).
GRACE = timedelta(hours=1)


def folders(prefix: str, storage: Storage | None = None) -> list[str]:
    """The folders directly under `prefix` ("attachments/"), by name."""
    try:
        found, _ = (storage or default_storage).listdir(prefix)
    except FileNotFoundError:
        return []
    return sorted(found)


def files_under(prefix: str, storage: Storage | None = None) -> Iterator[str]:
    """Every stored name under `prefix`, however deep, one folder listing at a time."""
    storage = storage or default_storage
    try:
        subfolders, files = storage.listdir(prefix)
    except FileNotFoundError:
        return
    for name in files:
        yield f"{prefix}{name}"
    for folder in subfolders:
        yield from files_under(f"{prefix}{folder}/", storage)


def _old_enough(storage: Storage, name: str, cutoff: datetime) -> bool:
    try:
        return storage.get_modified_time(name) < cutoff
    except (FileNotFoundError, NotImplementedError):
        return False  # gone meanwhile, or a storage that cannot tell: left alone


def delete_unused(
    prefix: str, in_use: Callable[[str], bool], *, grace: timedelta = GRACE,
    storage: Storage | None = None,
) -> int:  # fmt: skip
    """Delete the files under `prefix` (in `storage`, the default one unless told) that
    nothing uses and that are older than `grace`; how many went."""
    storage = storage or default_storage
    cutoff = timezone.now() - grace
    deleted = 0
    for name in list(files_under(prefix, storage)):
        if not in_use(name) and _old_enough(storage, name, cutoff):
            storage.delete(name)
            deleted += 1
    return deleted


def delete_all(prefix: str, storage: Storage | None = None) -> int:
    """Delete every file under `prefix` (what a deleted owner left), and on disk its emptied
    folders too; how many files went."""
    storage = storage or default_storage
    deleted = 0
    for name in list(files_under(prefix, storage)):
        storage.delete(name)
        deleted += 1
    if isinstance(storage, FileSystemStorage):  # a bucket has no folders to leave
        shutil.rmtree(storage.path(prefix), ignore_errors=True)
    return deleted


def prune_empty(prefix: str) -> None:
    """On disk, remove the folder at `prefix` if nothing is left in it (a bucket has none)."""
    if isinstance(default_storage, FileSystemStorage):
        with contextlib.suppress(OSError):  # not empty, or gone
            os.rmdir(default_storage.path(prefix))
