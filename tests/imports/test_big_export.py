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
    """The memory reading takes does not grow with the file: four times the conversations
    take about the same, a small part of the file (its reads are 1 MB: a long string costs
    the reader one copy per read)."""
    held = {}
    for megabytes in (8, 32):
        path = tmp_path / f"conversations-{megabytes}.json"
        count = write_export(path, megabytes)
        preview = {}
        held[megabytes] = peak_bytes(lambda: preview.update(scan(path, imported=set())))  # noqa: B023
        assert preview["conversations"] == count and preview["branches"] == 6 * count
    size = path.stat().st_size
    whole = peak_bytes(lambda: json.loads(path.read_bytes()))
    # Reading the file whole takes several times its size; streaming, a small part of it.
    assert whole > size and held[32] < size / 4, (held, size, whole)
    assert held[32] < 1.5 * held[8], held
