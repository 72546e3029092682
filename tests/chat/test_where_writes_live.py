"""Where the chat app writes its rows (docs/architecture.md, "Where writes live"): `records/`
holds the writes of one kind of row each; `council/` holds the actions that write several kinds
in one transaction under the thread's lock (a turn's start, dispatch, rounds, commands,
recovery). Nothing above them (live/, web/, tasks, admin actions) and nothing below them
(display/, the reads, the models) writes a row. Read statically, so a write added in the wrong
place fails here before it ships."""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings

CHAT = Path(settings.BASE_DIR) / "apps" / "chat"
WRITING_LAYERS = ("records", "council")
# Methods that write wherever they are called (an instance's save, a manager's bulk writes).
ALWAYS_WRITES = {"save", "bulk_create", "bulk_update", "get_or_create", "update_or_create"}
# Methods that write when called on a manager or a queryset (not a dict's update, a Redis
# client's delete or a workspace's).
QUERYSET_WRITES = {"create", "update", "delete"}
QUERYSET_MARKS = (".objects", ".filter(", ".exclude(", ".all(", "_set.")


def row_writes(path: Path) -> list[tuple[int, str]]:
    """(line, method) of each row write in a module, in line order."""
    source = path.read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, receiver = node.func.attr, ast.get_source_segment(source, node.func.value) or ""
        if method in ALWAYS_WRITES or (
            method in QUERYSET_WRITES and any(mark in receiver for mark in QUERYSET_MARKS)
        ):
            found.append((node.lineno, method))
    return sorted(found)


def modules_outside_the_writing_layers() -> list[Path]:
    return [
        path
        for path in CHAT.rglob("*.py")
        if path.relative_to(CHAT).parts[0] not in (*WRITING_LAYERS, "migrations")
    ]


def test_rows_are_written_only_by_records_and_council():
    misplaced = [
        f"{path.relative_to(CHAT)}:{line} {method}"
        for path in modules_outside_the_writing_layers()
        for line, method in row_writes(path)
    ]
    assert misplaced == [], "row writes outside records/ and council/:\n" + "\n".join(misplaced)


def test_the_check_sees_the_writes_it_is_meant_to(tmp_path):
    """The scan itself: it finds each kind of write and passes over the look-alikes."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "message.save()\n"
        "Message.objects.create(seq=1)\n"
        "Message.objects.filter(pk=1).update(seq=2)\n"
        "thread.message_set.all().delete()\n"
        "ReadMark.objects.bulk_create([])\n"
        "counts.update({1: 2})\n"
        "client.delete(key)\n"
        "session_workspace(s).delete(path)\n"
    )
    assert [method for _, method in row_writes(sample)] == [
        "save",
        "create",
        "update",
        "delete",
        "bulk_create",
    ]
    assert row_writes(CHAT / "records" / "threads.py"), "the records' own writes are seen"
