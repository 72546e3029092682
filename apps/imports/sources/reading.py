"""Open an export (a `.zip` or a JSON file), tell which product made it, and read it one
conversation at a time: a list of conversations is parsed as a stream (ijson), so a 200 MB
export never sits in memory whole; one conversation that cannot be read is reported and the
next one read."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

import ijson

from apps.imports.sources import chatgpt, claude, librechat, openwebui, parley
from apps.imports.sources.common import (
    MAX_ATTACHMENT_BYTES,
    BrokenConversation,
    SourceConversation,
    SourceFile,
    clean_title,
)

SOURCES = (chatgpt, claude, openwebui, librechat, parley)
LABELS = {source.FORMAT: source.LABEL for source in SOURCES}
# A file that is one JSON object (not a list) is read whole: LibreChat's and Parley's exports
# hold one conversation each.
MAX_SINGLE_OBJECT_BYTES = 64 * 1024 * 1024


class UnreadableFile(ValueError):
    """The file as a whole cannot be read; the message says why in words a person can act on."""


@dataclass
class Entry:
    """One conversation of the file, read, or the reason it could not be."""

    position: int  # 1-based, in the file
    conversation: SourceConversation | None = None
    format: str = ""
    title: str = ""
    broken: str = ""


def read_export(path: Path) -> Iterator[Entry]:
    """Each conversation of the export at `path`, in file order. Raises UnreadableFile when the
    file is not an export Parley reads (before any entry, or mid-file when it is cut off)."""
    with _opened(path) as (stream, files):
        yield from _entries(stream, files)


@contextmanager
def _opened(path: Path) -> Iterator[tuple[IO[bytes], Callable[[str], SourceFile | None]]]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if not n.endswith("/")]
            inner = [n for n in names if PurePosixPath(n).name == "conversations.json"]
            if not inner:
                raise UnreadableFile(
                    "The .zip holds no conversations.json: is it a ChatGPT or Claude export?"
                )
            with archive.open(min(inner, key=len)) as stream:
                yield stream, _zip_files(archive, names)
        return
    with open(path, "rb") as stream:
        yield stream, lambda pointer: None


def _zip_files(archive: zipfile.ZipFile, names: list[str]) -> Callable[[str], SourceFile | None]:
    """ChatGPT names each uploaded image after its pointer's id (`file-service://file-AbC`
    → `file-AbC-photo.png`, `sediment://file_00…` → `file_00…-photo.png`)."""
    by_base = {PurePosixPath(n).name: n for n in names}

    def find(pointer: str) -> SourceFile | None:
        ident = pointer.rsplit("://", 1)[-1].strip()
        if len(ident) < 6:
            return None
        for base, name in by_base.items():
            if base.startswith(ident):
                info = archive.getinfo(name)
                if info.file_size > MAX_ATTACHMENT_BYTES:
                    return None
                return SourceFile(
                    name=base[len(ident) :].lstrip("-_") or base, data=archive.read(name)
                )
        return None

    return find


def _entries(stream: IO[bytes], files: Callable[[str], SourceFile | None]) -> Iterator[Entry]:
    first, rewound = _peeked(stream)
    if first == b"[":
        items: Iterator[Any] = ijson.items(rewound, "item", use_float=True)
    elif first == b"{":
        data = rewound.read(MAX_SINGLE_OBJECT_BYTES + 1)
        if len(data) > MAX_SINGLE_OBJECT_BYTES:
            raise UnreadableFile("A single conversation over 64 MB is more than Parley imports.")
        items = iter([_loads(data)])
    else:
        raise UnreadableFile("This is not a JSON export (nor a .zip holding one).")
    position = 0
    try:
        for position, item in enumerate(items, start=1):
            yield _entry(position, item, files)
    except ijson.JSONError as exc:
        raise UnreadableFile(
            f"The file stops being valid JSON after conversation {position:,} ({exc}); "
            "the conversations before it can be imported."
        ) from None


class _Rewound:
    """A stream with its first bytes put back in front (a zip member cannot seek)."""

    def __init__(self, stream: IO[bytes], head: bytes) -> None:
        self.stream, self.head = stream, head

    def read(self, size: int = -1) -> bytes:
        if not self.head:
            return self.stream.read(size)
        if size is None or size < 0:
            data, self.head = self.head + self.stream.read(), b""
            return data
        data, self.head = self.head[:size], self.head[size:]
        return data if len(data) == size else data + self.stream.read(size - len(data))


def _peeked(stream: IO[bytes]) -> tuple[bytes, _Rewound]:
    """The file's first meaningful byte, and the stream from its start."""
    head = stream.read(4096).removeprefix(b"\xef\xbb\xbf")  # a BOM some editors add
    stripped = head.lstrip(b" \t\r\n")
    if not stripped:
        raise UnreadableFile("The file is empty.")
    return stripped[:1], _Rewound(stream, head)


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnreadableFile(f"The file is not valid JSON ({exc}).") from None


def _entry(position: int, item: Any, files: Callable[[str], SourceFile | None]) -> Entry:
    if not isinstance(item, dict):
        return Entry(position, broken="it is not a conversation (not a JSON object)")
    source = next((s for s in SOURCES if s.looks_like(item)), None)
    title = clean_title(item.get("title") or item.get("name") or "")
    if source is None:
        return Entry(position, title=title, broken="Parley does not know this kind of export")
    try:
        found = source.conversation(item, files)
    except BrokenConversation as exc:
        return Entry(position, format=source.FORMAT, title=title, broken=str(exc))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return Entry(
            position, format=source.FORMAT, title=title,
            broken=f"it is not shaped as a {source.LABEL} conversation ({type(exc).__name__})",
        )  # fmt: skip
    return Entry(position, conversation=found, format=source.FORMAT, title=found.title)
