"""The session workspace through Django's storage API, on disk and in a bucket of object
storage (moto's S3 server) alike: files in, files out, the quota, every way out of the session's
place refused; and the local copy a stdio MCP server works in, checked back in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, storages

from apps.workspace.files import Workspace, WorkspaceError, workspace_keys


@pytest.fixture(params=["disk", "bucket"])
def place(request, tmp_path):
    """The workspace storage: a folder, or the bucket (the `on_s3` fixture's)."""
    if request.param == "disk":
        return FileSystemStorage(location=tmp_path / "root", allow_overwrite=True)
    request.getfixturevalue("on_s3")
    return storages["workspace"]


@pytest.fixture
def workspace(place):
    return Workspace("session-a", quota_bytes=1000, storage=place)


def test_write_list_read_with_line_ranges_and_search(workspace):
    workspace.write("notes/scene.md", b"one\nTwo harbour\nthree\nfour harbour")
    workspace.write("b.txt", ContentFile(b"bell"))  # an upload's way: a file, in pieces
    assert [(f.path, f.size) for f in workspace.files()] == [("b.txt", 4), ("notes/scene.md", 34)]
    assert all(f.modified is not None for f in workspace.files())
    assert workspace.read("notes/scene.md", start_line=2, end_line=3) == "Two harbour\nthree"
    assert workspace.read("notes/scene.md", start_line=4) == "four harbour"
    assert workspace.search("HARBOUR") == [
        ("notes/scene.md", 2, "Two harbour"),
        ("notes/scene.md", 4, "four harbour"),
    ]
    with workspace.open("b.txt") as handle:
        assert handle.read() == b"bell"
    assert workspace.is_file("b.txt") and not workspace.is_file("notes")
    with pytest.raises(WorkspaceError, match="is a folder"):
        workspace.write("notes", b"x")
    workspace.delete("b.txt")
    assert [f.path for f in workspace.files()] == ["notes/scene.md"]
    with pytest.raises(WorkspaceError, match="no file"):
        workspace.read("b.txt")


@pytest.mark.parametrize(
    "path",
    ["../escape.txt", "/etc/passwd", "notes/../../escape", "C:\\\\Windows\\\\x", "",
     "..", "nul\x00byte", "\\\\server\\\\share"],
)  # fmt: skip
def test_paths_that_leave_the_session_are_refused(workspace, place, path):
    with pytest.raises(WorkspaceError):
        workspace.write(path, b"x")
    with pytest.raises(WorkspaceError):
        workspace.read(path)
    assert workspace_keys(place) == []  # nothing was written anywhere


def test_a_symlink_out_of_the_folder_is_neither_read_nor_listed(tmp_path):
    storage = FileSystemStorage(location=tmp_path / "root", allow_overwrite=True)
    workspace = Workspace("session-a", quota_bytes=1000, storage=storage)
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    folder = Path(storage.path("session-a"))
    folder.mkdir(parents=True)
    os.symlink(secret, folder / "link.txt")
    os.symlink(tmp_path, folder / "outside")
    with pytest.raises(WorkspaceError, match="leads outside"):
        workspace.read("link.txt")
    with pytest.raises(WorkspaceError, match="leads outside"):
        workspace.write("outside/new.txt", b"x")
    assert workspace.files() == []
    assert not (tmp_path / "new.txt").exists()


def test_the_quota_counts_what_is_there_and_a_replacement_frees_its_old_size(workspace):
    workspace.write("a.bin", b"x" * 600)
    with pytest.raises(WorkspaceError, match="quota is 1,000 bytes"):
        workspace.write("b.bin", b"x" * 500)
    workspace.write("a.bin", b"x" * 900)  # replacing: 900 fits
    assert workspace.used_bytes() == 900
    assert [f.path for f in workspace.files()] == ["a.bin"]  # no copies under other names


def test_two_sessions_have_separate_places_and_removal_takes_one(place):
    first = Workspace("one", quota_bytes=100, storage=place)
    second = Workspace("two", quota_bytes=100, storage=place)
    first.write("x.txt", b"mine")
    second.write("y.txt", b"theirs")
    assert [f.path for f in second.files()] == ["y.txt"]
    with pytest.raises(WorkspaceError):
        second.read("../one/x.txt")
    assert workspace_keys(place) == ["one", "two"]
    first.remove()
    assert workspace_keys(place) == ["two"] and first.files() == []


def test_a_local_copy_is_checked_back_in(workspace, place, tmp_path, settings):
    """What a stdio MCP server does in its folder comes back: changes, new files and
    deletions; a link to elsewhere on the machine and a file over the quota do not."""
    settings.VAR_DIR = tmp_path / "var"
    workspace.write("keep.txt", b"kept")
    workspace.write("change.txt", b"before")
    workspace.write("drop.txt", b"dropped")
    copy = workspace.local_copy()
    folder = copy.folder
    assert (folder / "change.txt").read_bytes() == b"before"
    (folder / "change.txt").write_bytes(b"after")
    (folder / "drop.txt").unlink()
    (folder / "new").mkdir()
    (folder / "new" / "made.txt").write_bytes(b"made by the server")
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    os.symlink(secret, folder / "link.txt")
    (folder / "huge.bin").write_bytes(b"x" * 2000)
    note = copy.check_in()
    files = {f.path: f.size for f in workspace.files()}
    if workspace.on_disk:  # the folder itself: nothing to check in, the files are there
        assert folder == Path(place.path("session-a")) and note == ""
        assert {"change.txt", "new/made.txt", "keep.txt"} <= set(files)
        return
    assert files == {"change.txt": 5, "keep.txt": 4, "new/made.txt": 18}
    assert workspace.read("change.txt") == "after"
    assert "huge.bin" in note and "quota" in note
    assert not folder.exists()  # the copy is gone
