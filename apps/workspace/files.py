"""A session's workspace: files the person uploads and the roles read and write.

The files live in Django's storage "workspace" (a folder, PARLEY_WORKSPACE_ROOT, or a bucket of
object storage), one prefix per session (its public id), under a size quota. Every path comes
from outside — a person's upload, a model's tool call — so each one is checked to stay inside
the session's prefix: absolute paths and `..` are refused, and on disk so are symlinks that
lead out. A stdio MCP server needs a real folder: `local_copy` gives it the folder itself on
disk, or a copy on this machine that is checked back in after the call.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage, storages

from apps.ops.storage import delete_all, files_under, folders

logger = logging.getLogger(__name__)
MAX_READ_CHARS = 200_000
MAX_SEARCH_HITS = 50
NAME = re.compile(r"^[^\x00-\x1f/\\]{1,200}$")
COPY_CHUNK = 1024 * 1024


class WorkspaceError(ValueError):
    """A refused path or operation; the message says why (for a person or a model)."""


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative, with forward slashes
    size: int
    modified: datetime | None = None

    @property
    def folder(self) -> str:
        return self.path.rpartition("/")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


def workspace_storage() -> Storage:
    return storages["workspace"]


class Workspace:
    def __init__(self, key: str, *, quota_bytes: int, storage: Storage | None = None):
        self.storage = storage or workspace_storage()
        self.key = key
        self.prefix = f"{key}/"
        self.quota_bytes = quota_bytes
        self.on_disk = isinstance(self.storage, FileSystemStorage)

    def name_of(self, relative: str) -> str:
        """The stored name of `relative` inside the workspace, or WorkspaceError."""
        relative = (relative or "").strip()
        pure = PurePosixPath(relative.replace("\\", "/"))
        if not relative or pure.is_absolute() or re.match(r"^[A-Za-z]:", relative):
            raise WorkspaceError(f"Use a path inside the workspace, not {relative!r}.")
        if any(part in ("..", "") for part in pure.parts) or not all(
            NAME.match(part) for part in pure.parts
        ):
            raise WorkspaceError(f"{relative!r} is not a valid path inside the workspace.")
        name = self.prefix + "/".join(pure.parts)
        if self.on_disk and not self._inside(name):
            raise WorkspaceError(f"{relative!r} leads outside the workspace.")
        return name

    def _inside(self, name: str) -> bool:
        """On disk: whether `name`, links followed, stays in the session's folder."""
        folder = Path(self.storage.path(self.key)).resolve()
        target = Path(self.storage.path(name)).resolve()
        return target == folder or folder in target.parents

    def _is_folder(self, name: str) -> bool:
        if self.on_disk:
            return os.path.isdir(self.storage.path(name))
        return next(files_under(f"{name}/", self.storage), None) is not None

    def is_file(self, relative: str) -> bool:
        name = self.name_of(relative)
        if self.on_disk:
            return os.path.isfile(self.storage.path(name))
        return self.storage.exists(name)

    def size(self, relative: str) -> int:
        self._require_file(relative)
        return self.storage.size(self.name_of(relative))

    def open(self, relative: str):
        """The file, opened for reading in binary (a context manager)."""
        self._require_file(relative)
        return self.storage.open(self.name_of(relative), "rb")

    def _require_file(self, relative: str) -> None:
        if not self.is_file(relative):
            raise WorkspaceError(f"There is no file {relative!r} in the workspace.")

    def files(self) -> list[FileInfo]:
        """Every file, sorted by path; on disk, links that lead out are left out."""
        found = []
        for name in self._names():
            try:
                size = self.storage.size(name)
                modified = self.storage.get_modified_time(name)
            except OSError:  # gone meanwhile
                continue
            found.append(FileInfo(name[len(self.prefix) :], size, modified))
        return sorted(found, key=lambda info: info.path)

    def _names(self) -> Iterator[str]:
        """Every stored name under the session's prefix; on disk, links to folders are not
        walked (they may lead anywhere, or round in a circle), nor files that lead out."""
        if not self.on_disk:
            yield from files_under(self.prefix, self.storage)
            return
        folder = Path(self.storage.path(self.key))
        for directory, _, names in os.walk(folder, followlinks=False):
            for name in names:
                stored = self.prefix + Path(directory, name).relative_to(folder).as_posix()
                if self._inside(stored):
                    yield stored

    def remove(self) -> None:
        """Every file (its session is gone)."""
        if self.on_disk:  # (rmtree never follows a link out)
            shutil.rmtree(self.storage.path(self.key), ignore_errors=True)
        else:
            delete_all(self.prefix, self.storage)

    def used_bytes(self) -> int:
        return sum(info.size for info in self.files())

    def read(self, relative: str, *, start_line: int = 1, end_line: int | None = None) -> str:
        with self.open(relative) as handle:  # no more than a reply can quote is read
            text = handle.read(MAX_READ_CHARS * 4).decode("utf-8", errors="replace")
        lines = text.splitlines()
        start = max(1, start_line)
        end = len(lines) if end_line is None else min(len(lines), end_line)
        if start > max(end, 1) and lines:
            raise WorkspaceError(
                f"{relative!r} has {len(lines)} lines; start at 1 to {len(lines)}."
            )
        chosen = "\n".join(lines[start - 1 : end])
        return chosen[:MAX_READ_CHARS]

    def search(self, query: str, *, limit: int = MAX_SEARCH_HITS) -> list[tuple[str, int, str]]:
        """(path, line number, line) for lines containing `query`, case-insensitively."""
        needle = query.strip().lower()
        if not needle:
            raise WorkspaceError("Give some text to search for.")
        hits = []
        for info in self.files():
            try:
                text = self.read(info.path)
            except WorkspaceError:
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if needle in line.lower():
                    hits.append((info.path, number, line.strip()[:300]))
                    if len(hits) >= limit:
                        return hits
        return hits

    def write(self, relative: str, content: bytes | File) -> FileInfo:
        """Create or replace a file, within the quota; a File (an upload) is copied in
        pieces, never read whole."""
        name = self.name_of(relative)
        if self._is_folder(name):
            raise WorkspaceError(f"{relative!r} is a folder.")
        size = len(content) if isinstance(content, bytes) else content.size
        existing = self.storage.size(name) if self.is_file(relative) else 0
        used = self.used_bytes() - existing
        if used + size > self.quota_bytes:
            raise WorkspaceError(
                f"The workspace quota is {self.quota_bytes:,} bytes; {used:,} are used, and "
                f"{relative!r} needs {size:,}. Delete some files first."
            )
        if isinstance(content, bytes):
            content = ContentFile(content)
        else:
            content.seek(0)
        saved = self.storage.save(name, content)  # the storage overwrites (settings.STORAGES)
        return FileInfo(saved[len(self.prefix) :], size)

    def delete(self, relative: str) -> None:
        self._require_file(relative)
        self.storage.delete(self.name_of(relative))

    def local_copy(self) -> LocalCopy:
        return LocalCopy(self)


class LocalCopy:
    """The workspace as a folder on this machine, for a stdio MCP server: on disk, the folder
    itself; on object storage, a copy made now, whose changes `check_in` writes back."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.before: dict[str, str] | None = None
        if workspace.on_disk:
            self.folder = Path(workspace.storage.path(workspace.key))
            self.folder.mkdir(parents=True, exist_ok=True)
            return
        parent = Path(settings.VAR_DIR) / "workspace-copies"
        parent.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix=f"{workspace.key}-", dir=parent))
        self.before = {}
        for info in workspace.files():
            target = self.folder / info.path
            target.parent.mkdir(parents=True, exist_ok=True)
            with workspace.open(info.path) as read, target.open("wb") as write:
                shutil.copyfileobj(read, write, COPY_CHUNK)
            self.before[info.path] = _digest(target)

    def check_in(self) -> str:
        """Write what the call changed back to storage and drop the copy; a sentence about
        anything that could not be kept ("" when all was)."""
        if self.before is None:
            return ""
        try:
            now = _local_files(self.folder)
            problems = []
            for path in sorted(set(self.before) - set(now)):
                self.workspace.delete(path)
            for path, digest in sorted(now.items()):
                if self.before.get(path) == digest:
                    continue
                try:
                    with (self.folder / path).open("rb") as handle:
                        self.workspace.write(path, File(handle))
                except WorkspaceError as exc:
                    problems.append(str(exc))
            return " ".join(problems)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _local_files(folder: Path) -> dict[str, str]:
    """Relative path -> digest of the regular files under `folder`; links are not followed
    (a server's link to elsewhere on this machine must not be copied into storage)."""
    found = {}
    for directory, _, names in os.walk(folder, followlinks=False):
        for name in names:
            path = Path(directory, name)
            if path.is_file() and not path.is_symlink():
                found[path.relative_to(folder).as_posix()] = _digest(path)
    return found


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def workspace_keys(storage: Storage | None = None) -> list[str]:
    """The names of the session prefixes in the workspace storage (each a session's public id)."""
    return folders("", storage or workspace_storage())
