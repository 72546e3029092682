"""The heavy readings of an untrusted file — a PDF's text, its first page drawn — done in a
child process under a memory and CPU ceiling and a wall-clock limit: a PDF built to make a
decoder spin or swell fails that reading (the caller says so in words), never the process that
asked. The ceilings are set by the child before it reads a byte (`apply_limits`, which the
imports' reader uses too)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

MEMORY_MB = 512
CPU_SECONDS = 30
WALL_SECONDS = 60
ROOT = Path(__file__).resolve().parents[2]


PAGE_BREAK = "\f"  # between pages in the child's answer (a form feed is never a page's text)


class TooCostly(Exception):
    """The reading went past its ceiling, or its child stopped; the message says which."""


def apply_limits(memory_mb: int, cpu_seconds: int) -> None:
    """This process's ceilings: its address space, and CPU seconds (SIGXCPU at the soft
    limit, SIGKILL a little after); no core dumps."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 1_048_576, memory_mb * 1_048_576))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))


def pdf_text(data: bytes, *, max_chars: int) -> str:
    """sniff.pdf_text, bounded; a sentence in place of the text when it costs too much."""
    try:
        return _run("pdf_text", data, max_chars)
    except TooCostly as exc:
        return f"[the PDF's text could not be read: {exc}]"


def pdf_pages(data: bytes, *, max_chars: int) -> list[str] | None:
    """Each page's text (None: the PDF cannot be opened, or is encrypted); TooCostly past
    the ceilings."""
    text = _run("pdf_pages", data, max_chars)
    return None if text is None else text.split(PAGE_BREAK)


def pdf_page(data: bytes, number: int) -> bytes | None:
    """sniff.pdf_page_picture, bounded; None when it cannot be drawn or costs too much."""
    try:
        return _run("pdf_page", data, number)
    except TooCostly:
        return None


def pdf_first_page(data: bytes) -> bytes | None:
    """sniff.pdf_first_page, bounded; None (no preview) when it costs too much."""
    try:
        return _run("pdf_first_page", data, None)
    except TooCostly:
        return None


def _run(reading: str, data: bytes, argument: Any) -> Any:
    try:
        done = subprocess.run(  # noqa: S603 (this module, with our own arguments)
            [sys.executable, "-m", "apps.attachments.bounded", reading, repr(argument),
             str(MEMORY_MB), str(CPU_SECONDS)],
            input=data, capture_output=True, timeout=WALL_SECONDS, cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise TooCostly(f"it took more than {WALL_SECONDS} s") from None
    if done.returncode != 0 or not done.stdout:
        if done.returncode < 0 or b"MemoryError" in done.stderr:
            raise TooCostly(f"it needed more than {MEMORY_MB} MB or {CPU_SECONDS} s of work")
        raise TooCostly(f"its reader stopped (exit code {done.returncode})")
    kind, value = done.stdout[:1], done.stdout[1:]
    if kind == b"T":
        return value.decode("utf-8", "replace")
    if kind == b"B":
        return value
    if kind == b"N":
        return None
    raise TooCostly("its reader answered nothing usable")


def main(argv: list[str]) -> int:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing else may write into the answer
    apply_limits(int(argv[2]), int(argv[3]))
    from apps.attachments import sniff

    data = sys.stdin.buffer.read()
    if argv[0] == "pdf_text":
        value: Any = sniff.pdf_text(data, max_chars=int(argv[1]))
    elif argv[0] == "pdf_first_page":
        value = sniff.pdf_first_page(data)
    elif argv[0] == "pdf_page":
        value = sniff.pdf_page_picture(data, number=int(argv[1]))
    elif argv[0] == "pdf_pages":
        pages = sniff.pdf_pages(data, max_chars=int(argv[1]))
        value = None if pages is None else PAGE_BREAK.join(p.replace("\f", " ") for p in pages)
    else:
        return 2
    # Plain data, marked by its kind (the answer of a child that read a hostile file is read
    # as plain data too, never unpickled).
    if value is None:
        out.write(b"N")
    elif isinstance(value, str):
        out.write(b"T" + value.encode("utf-8", "replace"))
    else:
        out.write(b"B" + value)
    out.flush()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.exit(main(sys.argv[1:]))
