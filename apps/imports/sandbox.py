"""Reading an export in a child process under a memory and CPU ceiling: whatever a file does
to the readers (nesting, sizes, a parser's worst case), the child is what fails, and its job
ends with a sentence; the worker, and the host, carry on.

The parent starts `python -m apps.imports.sandbox MODE PATH`, which sets its limits before it
reads a byte and answers in frames on its standard output (a length, then a pickle of plain
data: what the readers made, never the file's own objects). `scan` sends progress and the
preview; `entries` sends each conversation read and laid out, waiting while the parent writes
(a full pipe blocks it, and a blocked child spends no CPU)."""

from __future__ import annotations

import io
import json
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from apps.attachments.bounded import apply_limits
from apps.imports.layout import Layout, layout
from apps.imports.scanning import scan
from apps.imports.sources.reading import Entry, UnreadableFile, read_export

HEADER = struct.Struct(">Q")
WAIT_SECONDS = 1.0  # how often a parent waiting for the child asks whether to stop
MEMORY_ERROR = (
    "Reading it needed more than {mb:,} MB of memory, the most an import may use (a file "
    "nested thousands of levels deep, or one conversation of that size?)."
)
CPU_ERROR = "Reading it took more than {seconds:,} s of work, the most this file's size may take."


class Stopped(Exception):
    """The parent was asked to stop (a cancel) while the child read."""


@dataclass
class Planned:
    """One conversation read in the child: the entry, and (when it is whole) its threads."""

    entry: Entry
    planned: Layout | None


def cpu_seconds(path: Path) -> int:
    """The CPU the child may spend: a base plus a share per MB (a 2 GB export reads in
    minutes; a small file that would spin for long is not an export)."""
    megabytes = path.stat().st_size / 1_048_576
    per_mb = settings.PARLEY_IMPORT_CPU_SECONDS_PER_MB
    return int(settings.PARLEY_IMPORT_CPU_SECONDS + per_mb * megabytes)


def preview(
    path: Path, *, imported: set[str], progress: Callable[[int], None],
    should_stop: Callable[[], bool],
) -> dict[str, Any]:  # fmt: skip
    """What importing the file would make (scanning.scan), read in the child."""
    with _child("scan", path, stdin=json.dumps(sorted(imported)).encode()) as frames:
        for kind, value in _frames(frames, should_stop):
            if kind == "progress":
                progress(value)
            elif kind == "preview":
                return value
    raise UnreadableFile("The reader stopped before it finished.")


@contextmanager
def conversations(path: Path, *, should_stop: Callable[[], bool]) -> Iterator[Iterator[Planned]]:
    """Each conversation of the file, read and laid out in the child, in file order."""
    with _child("entries", path, stdin=b"") as frames:
        yield (value for kind, value in _frames(frames, should_stop) if kind == "entry")


@dataclass
class _Frames:
    process: subprocess.Popen
    errors: IO[bytes]
    path: Path
    memory_mb: int
    cpu: int


@contextmanager
def _child(mode: str, path: Path, *, stdin: bytes) -> Iterator[_Frames]:
    memory_mb, cpu = settings.PARLEY_IMPORT_MEMORY_MB, cpu_seconds(path)
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(  # noqa: S603 (this module, with our own arguments)
            [sys.executable, "-m", "apps.imports.sandbox", mode, str(path), str(memory_mb),
             str(cpu)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
            cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        try:
            assert process.stdin is not None
            try:
                process.stdin.write(stdin)
                process.stdin.close()
            except BrokenPipeError:
                pass  # it died at once: its exit says why
            yield _Frames(process, errors, path, memory_mb, cpu)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            assert process.stdout is not None
            process.stdout.close()


def _frames(frames: _Frames, should_stop: Callable[[], bool]) -> Iterator[tuple[str, Any]]:
    stdout = frames.process.stdout
    assert stdout is not None
    fd = stdout.fileno()
    buffer = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            if not selector.select(WAIT_SECONDS):
                if should_stop():
                    raise Stopped
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                _ended(frames)
                return
            buffer += chunk
            while len(buffer) >= HEADER.size:
                (size,) = HEADER.unpack_from(buffer)
                if len(buffer) < HEADER.size + size:
                    break
                kind, value = _load(bytes(buffer[HEADER.size : HEADER.size + size]))
                del buffer[: HEADER.size + size]
                if kind == "refused":
                    raise UnreadableFile(value)
                if kind == "done":
                    return
                yield kind, value


# What a frame may hold: the readers' plain data. The child reads hostile files, so even its
# frames are loaded as if they were hostile: no other class is ever built from them.
ALLOWED = {
    ("apps.imports.sandbox", "Planned"), ("apps.imports.sources.reading", "Entry"),
    ("apps.imports.sources.common", "SourceConversation"),
    ("apps.imports.sources.common", "SourceMessage"),
    ("apps.imports.sources.common", "SourceFile"), ("apps.imports.layout", "Layout"),
    ("apps.imports.layout", "ThreadPlan"), ("collections", "Counter"),
    ("datetime", "datetime"), ("datetime", "timezone"), ("datetime", "timedelta"),
}  # fmt: skip


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not a reader's data")
        return super().find_class(module, name)


def _load(data: bytes) -> Any:
    return _Unpickler(io.BytesIO(data)).load()  # only ALLOWED classes


def _ended(frames: _Frames) -> None:
    """The child closed its output without saying it was done: say why it stopped."""
    code = frames.process.wait()
    if code in (-signal.SIGXCPU, -signal.SIGKILL) and _used_cpu(frames):
        raise UnreadableFile(CPU_ERROR.format(seconds=frames.cpu))
    frames.errors.seek(0)
    said = frames.errors.read()[-2000:].decode("utf-8", "replace")
    if code < 0 or "MemoryError" in said or "Cannot allocate memory" in said:
        raise UnreadableFile(MEMORY_ERROR.format(mb=frames.memory_mb))
    raise UnreadableFile(f"The reader stopped unexpectedly (exit code {code}).")


def _used_cpu(frames: _Frames) -> bool:
    return frames.process.returncode == -signal.SIGXCPU or frames.cpu <= 0


# The child's side.


def _send(out: IO[bytes], kind: str, value: Any) -> None:
    data = pickle.dumps((kind, value), protocol=pickle.HIGHEST_PROTOCOL)
    out.write(HEADER.pack(len(data)) + data)
    out.flush()


def _run(mode: str, path: Path, out: IO[bytes]) -> None:
    if mode == "scan":
        imported = set(json.loads(sys.stdin.buffer.read()))
        found = scan(path, imported=imported, progress=lambda n: _send(out, "progress", n))
        _send(out, "preview", found)
    else:
        for entry in read_export(path):
            planned = layout(entry.conversation) if entry.conversation is not None else None
            _send(out, "entry", Planned(entry, planned))
    _send(out, "done", None)


def main(argv: list[str]) -> int:
    mode, path, memory_mb, cpu = argv[0], Path(argv[1]), int(argv[2]), int(argv[3])
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing else may write into the frames
    apply_limits(memory_mb, cpu)
    # A file that is one object is read whole by a recursive parser: a thread with a deep
    # stack lets it read a conversation nested thousands of replies deep.
    threading.stack_size(memory_mb * 1_048_576 // 4)  # a share of the ceiling
    sys.setrecursionlimit(RECURSION_LIMIT)
    result: list[int] = []
    reader = threading.Thread(target=lambda: result.append(_guarded(mode, path, out, memory_mb)))
    reader.start()
    reader.join()
    return result[0] if result else 1


RECURSION_LIMIT = 100_000


def _guarded(mode: str, path: Path, out: IO[bytes], memory_mb: int) -> int:
    try:
        _run(mode, path, out)
    except UnreadableFile as exc:
        _send(out, "refused", str(exc))
    except MemoryError:
        _send(out, "refused", MEMORY_ERROR.format(mb=memory_mb))
    except RecursionError:
        _send(out, "refused", "The file nests its data too deep to read.")
    except BrokenPipeError:
        return 0  # the parent stopped listening (a cancel)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from apps.imports import sandbox  # its classes, not __main__'s, go into the frames

    sys.exit(sandbox.main(sys.argv[1:]))
