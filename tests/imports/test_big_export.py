"""A big export is read one conversation at a time: reading it for the preview holds a few
conversations in memory, not the file (`bench/imports.py` measures a 200 MB one as people run
it; this keeps the property in the suite)."""

from __future__ import annotations

import json
import tracemalloc

from apps.imports.scanning import scan
from bench.imports import write_export


def peak_bytes(function) -> int:
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_a_big_export_holds_a_conversation_not_the_file(tmp_path):
    path = tmp_path / "conversations.json"
    count = write_export(path, 16)
    size = path.stat().st_size
    preview = {}
    streamed = peak_bytes(lambda: preview.update(scan(path, imported=set())))
    assert preview["conversations"] == count and preview["branches"] == 6 * count
    whole = peak_bytes(lambda: json.loads(path.read_bytes()))
    # Reading the file whole takes several times its size; streaming, a small part of it.
    assert whole > size and streamed < size / 8, (streamed, size, whole)
