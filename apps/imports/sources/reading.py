"""Open an export (a `.zip` or a JSON file), tell which product made it, and read it one
conversation at a time: a list of conversations is parsed as a stream (ijson), so a 200 MB
export never sits in memory whole; one conversation that cannot be read is reported and the
next one read."""

from __future__ import annotations

import json
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

import ijson
from ijson.common import ObjectBuilder

from apps.imports.sources import chatbotui, chatgpt, claude, librechat, openwebui, parley
from apps.imports.sources.common import (
    MAX_ATTACHMENT_BYTES,
    BrokenConversation,
    SourceConversation,
    SourceFile,
    clean_title,
    inherit_times,
    stable_key,
)

SOURCES = (chatgpt, claude, openwebui, librechat, parley, chatbotui)
LABELS = {source.FORMAT: source.LABEL for source in SOURCES}
# The sources as people are told of them (the Import page, the API, the docs' check): Parley
# itself last.
GUIDE = sorted(((s.LABEL, s.WHERE) for s in SOURCES), key=lambda pair: pair[0] == "Parley")


def sources_sentence() -> str:
    """ "ChatGPT, Claude, …, Chatbot UI or Parley": every source, for a sentence."""
    labels = [label for label, _ in GUIDE]
    return ", ".join(labels[:-1]) + " or " + labels[-1]


# A file that is one JSON object (not a list) is read whole: LibreChat's and Parley's exports
# hold one conversation each.
MAX_SINGLE_OBJECT_BYTES = 64 * 1024 * 1024
# How deep a conversation of a list may nest its data: real exports nest about ten levels. A
# deeper one is reported broken and never built (the list reader's memory grows with the
# square of the depth: 16,000 levels cost it 600 MB); the others are read. A file that is one
# object (LibreChat nests each reply in the one before) is read whole, as deep as the
# reader's stack allows (apps/imports/sandbox.py).
MAX_NESTING = 200
# A .zip's members (ChatGPT's holds one per image) and how big they say they are unpacked.
MAX_ZIP_MEMBERS = 100_000
MAX_UNZIPPED_BYTES = 16 * 1024**3
DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError)
# The JSON reader copies a string that spans its reads once per read: with big reads, a
# 300 MB string costs 20 s instead of 5 minutes (and the reader 2 MB more).
READ_BYTES = 1024 * 1024


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
    file is not an export Parley reads; a file cut off after some conversations ends with a
    broken entry for the rest."""
    try:
        with _opened(path) as (opener, files):
            with opener() as stream:
                deep = _deep_items(stream)
            with opener() as stream:
                yield from _entries(stream, files, deep)
    except DAMAGED as exc:
        raise UnreadableFile(f"The .zip is damaged ({exc}).") from None


Opener = Callable[[], IO[bytes]]


@contextmanager
def _opened(path: Path) -> Iterator[tuple[Opener, Callable[[str], SourceFile | None]]]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_ZIP_MEMBERS:
                raise UnreadableFile(
                    f"The .zip holds {len(members):,} files; an export holds far fewer "
                    f"(Parley reads up to {MAX_ZIP_MEMBERS:,})."
                )
            if sum(member.file_size for member in members) > MAX_UNZIPPED_BYTES:
                raise UnreadableFile(
                    f"Unpacked, the .zip would be over {MAX_UNZIPPED_BYTES // 1024**3} GB."
                )
            names = [n for n in archive.namelist() if not n.endswith("/")]
            inner = [n for n in names if PurePosixPath(n).name == "conversations.json"]
            if not inner:
                raise UnreadableFile(
                    "The .zip holds no conversations.json: is it a ChatGPT or Claude export?"
                )
            chosen = min(inner, key=len)
            yield (lambda: archive.open(chosen)), _zip_files(archive, names)
        return

    def opener() -> IO[bytes]:
        return path.open("rb")  # the caller's with closes it

    yield opener, lambda pointer: None


def _deep_items(stream: IO[bytes]) -> dict[int, int]:
    """The conversations (by position) nested deeper than MAX_NESTING, and how deep, from a
    pass over the file's events that builds nothing. Invalid JSON ends the pass: reading the
    file says where."""
    first, rewound = _peeked(stream)
    listed = first == b"["
    deep: dict[int, int] = {}
    if not listed:
        return deep  # one conversation, read whole (see MAX_NESTING)
    depth = position = 0
    try:
        for event, _ in ijson.basic_parse(rewound, use_float=True, buf_size=READ_BYTES):
            if event == "start_map" or event == "start_array":
                if depth == 1 and listed:
                    position += 1
                depth += 1
                level = depth - 1 if listed else depth
                if level > MAX_NESTING:
                    at = max(position, 1)
                    deep[at] = max(deep.get(at, 0), level)
            elif event == "end_map" or event == "end_array":
                depth -= 1
            elif depth == 1 and listed and event != "map_key":
                position += 1
    except ijson.JSONError:
        pass
    return deep


def _items_skipping(stream: IO[bytes] | _Rewound, deep: dict[int, int]) -> Iterator[Any]:
    """The list's items, built from its events, but for the deep ones (their positions):
    of those only the top level's plain values are kept (a title to report it by). Slower
    than ijson.items, so used only for a file that has deep items."""
    depth = position = 0
    builder: ObjectBuilder | None = None
    shallow: dict[str, Any] = {}
    key = None
    for event, value in ijson.basic_parse(stream, use_float=True, buf_size=READ_BYTES):
        opens, closes = event in ("start_map", "start_array"), event in ("end_map", "end_array")
        if depth == 1 and not closes:
            position += 1
            builder, shallow = (None, {}) if position in deep else (ObjectBuilder(), {})
        if builder is not None and depth >= 1:
            builder.event(event, value)
        elif depth == 2 and event == "map_key":
            key = value
        elif depth == 2 and not opens and not closes and key is not None:
            shallow[key] = value
        depth += opens - closes
        if depth == 1 and (closes or not opens):
            yield builder.value if builder is not None else shallow
            builder, key = None, None


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
                try:
                    data = archive.read(name)
                except DAMAGED as exc:
                    raise BrokenConversation(
                        f"its file {base!r} is damaged in the .zip ({exc})"
                    ) from None
                return SourceFile(name=base[len(ident) :].lstrip("-_") or base, data=data)
        return None

    return find


def _entries(
    stream: IO[bytes], files: Callable[[str], SourceFile | None], deep: dict[int, int]
) -> Iterator[Entry]:
    first, rewound = _peeked(stream)
    if first == b"[" and deep:
        items: Iterator[Any] = _items_skipping(rewound, deep)
    elif first == b"[":
        items = ijson.items(rewound, "item", use_float=True, buf_size=READ_BYTES)
    elif first == b"{":  # one conversation, read whole (LibreChat's nests a level per reply)
        data = _read_up_to(rewound, MAX_SINGLE_OBJECT_BYTES + 1)
        if len(data) > MAX_SINGLE_OBJECT_BYTES:
            raise UnreadableFile("A single conversation over 64 MB is more than Parley imports.")
        document = _loads(data)
        # Chatbot UI's export is one object that lists its conversations.
        items = iter(document["history"] if chatbotui.is_export(document) else [document])
    else:
        raise UnreadableFile("This is not a JSON export (nor a .zip holding one).")
    position = 0
    try:
        for position, item in enumerate(items, start=1):
            if position in deep:
                yield Entry(
                    position, title=_title_of(item),
                    broken=f"its data nests {deep[position]:,} levels deep (Parley reads up to "
                    f"{MAX_NESTING})",
                )  # fmt: skip
                continue
            yield _entry(position, item, files)
    except ijson.JSONError as exc:
        if not position:
            raise UnreadableFile(f"The file is not valid JSON ({exc}).") from None
        # Cut off (a download that stopped): what came before it imports; the rest is
        # reported as one conversation that could not be read.
        yield Entry(
            position + 1, title="The rest of the file",
            broken=f"the file stops being valid JSON after conversation {position:,} ({exc}): "
            "nothing after that point can be read",
        )  # fmt: skip


def _read_up_to(stream: IO[bytes] | _Rewound, limit: int) -> bytes:
    """At most `limit` bytes, read a piece at a time (one read of `limit` would set aside
    that much memory however small the file is)."""
    pieces, size = [], 0
    while size < limit and (piece := stream.read(min(READ_BYTES, limit - size))):
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)


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
    except RecursionError:
        raise UnreadableFile(
            "The file nests its data too deep to read; exports nest about ten levels."
        ) from None


def _title_of(item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    return clean_title(item.get("title") or item.get("name") or "")


def _entry(position: int, item: Any, files: Callable[[str], SourceFile | None]) -> Entry:
    if not isinstance(item, dict):
        return Entry(position, broken="it is not a conversation (not a JSON object)")
    source = next((s for s in SOURCES if s.looks_like(item)), None)
    title = _title_of(item)
    if source is None:
        return Entry(position, title=title, broken="Parley does not know this kind of export")
    try:
        found = source.conversation(item, files)
    except BrokenConversation as exc:
        return Entry(position, format=source.FORMAT, title=title, broken=str(exc))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        return Entry(
            position, format=source.FORMAT, title=title,
            broken=f"it is not shaped as a {source.LABEL} conversation ({type(exc).__name__})",
        )  # fmt: skip
    except RecursionError:
        return Entry(position, format=source.FORMAT, title=title,
                     broken="its data nests too deep to read")  # fmt: skip
    found.key = stable_key(found.key)
    inherit_times(found)
    return Entry(position, conversation=found, format=source.FORMAT, title=found.title)
