"""A session's workspace: a folder of files the person uploads and the roles read and write.

Plain filesystem functions over one folder per session (under `PARLEY_WORKSPACE_ROOT`, named
by the session's public id), with a size quota. Every path comes from outside — a person's
upload, a model's tool call — so each one is resolved inside the folder or refused: absolute
paths, `..`, and symlinks that lead out are all errors.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

MAX_READ_CHARS = 200_000
MAX_SEARCH_HITS = 50
NAME = re.compile(r"^[^\x00-\x1f/\\]{1,200}$")


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


class Workspace:
    def __init__(self, root: Path | str, key: str, *, quota_bytes: int):
        self.base = Path(root).resolve()
        self.folder = self.base / key
        self.quota_bytes = quota_bytes

    def ensure(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def resolve(self, relative: str) -> Path:
        """The real path of `relative` inside the folder, or WorkspaceError."""
        relative = (relative or "").strip()
        pure = PurePosixPath(relative.replace("\\", "/"))
        if not relative or pure.is_absolute() or re.match(r"^[A-Za-z]:", relative):
            raise WorkspaceError(f"Use a path inside the workspace, not {relative!r}.")
        if any(part in ("..", "") for part in pure.parts) or not all(
            NAME.match(part) for part in pure.parts
        ):
            raise WorkspaceError(f"{relative!r} is not a valid path inside the workspace.")
        folder = self.ensure().resolve()
        target = (folder / Path(*pure.parts)).resolve()
        if target != folder and folder not in target.parents:
            raise WorkspaceError(f"{relative!r} leads outside the workspace.")
        return target

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.folder.resolve()).as_posix()

    def files(self) -> list[FileInfo]:
        """Every regular file, sorted by path; links that lead out are left out."""
        folder = self.ensure().resolve()
        found = []
        for directory, _, names in os.walk(folder):
            for name in names:
                path = Path(directory, name)
                real = path.resolve()
                if path.is_symlink() and folder not in real.parents:
                    continue
                if real.is_file():
                    stat = real.stat()
                    changed = datetime.fromtimestamp(stat.st_mtime, tz=UTC)
                    found.append(
                        FileInfo(path.relative_to(folder).as_posix(), stat.st_size, changed)
                    )
        return sorted(found, key=lambda info: info.path)

    def remove(self) -> None:
        """The folder and everything in it (its session is gone)."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def used_bytes(self) -> int:
        return sum(info.size for info in self.files())

    def read(self, relative: str, *, start_line: int = 1, end_line: int | None = None) -> str:
        path = self.resolve(relative)
        if not path.is_file():
            raise WorkspaceError(f"There is no file {relative!r} in the workspace.")
        text = path.read_bytes()[: MAX_READ_CHARS * 4].decode("utf-8", errors="replace")
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

    def write(self, relative: str, data: bytes) -> FileInfo:
        """Create or replace a file, within the quota."""
        path = self.resolve(relative)
        if path.is_dir():
            raise WorkspaceError(f"{relative!r} is a folder.")
        existing = path.stat().st_size if path.is_file() else 0
        used = self.used_bytes() - existing
        if used + len(data) > self.quota_bytes:
            raise WorkspaceError(
                f"The workspace quota is {self.quota_bytes:,} bytes; {used:,} are used, and "
                f"{relative!r} needs {len(data):,}. Delete some files first."
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.uploading")
        temporary.write_bytes(data)
        temporary.replace(path)
        return FileInfo(self._relative(path), len(data))

    def delete(self, relative: str) -> None:
        path = self.resolve(relative)
        if not path.is_file():
            raise WorkspaceError(f"There is no file {relative!r} in the workspace.")
        path.unlink()


def workspace_keys(root: Path | str) -> list[str]:
    """The names of the session folders under `root` (each a session's public id)."""
    base = Path(root)
    return sorted(entry.name for entry in base.iterdir() if entry.is_dir()) if base.is_dir() else []
