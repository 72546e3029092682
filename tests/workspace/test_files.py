"""The session workspace: files in, files out, and every way out of the folder refused."""

from __future__ import annotations

import os

import pytest

from apps.workspace.files import Workspace, WorkspaceError


@pytest.fixture
def workspace(tmp_path):
    return Workspace(tmp_path / "root", "session-a", quota_bytes=1000)


def test_write_list_read_with_line_ranges_and_search(workspace):
    workspace.write("notes/scene.md", b"one\nTwo harbour\nthree\nfour harbour")
    workspace.write("b.txt", b"bell")
    assert [(f.path, f.size) for f in workspace.files()] == [("b.txt", 4), ("notes/scene.md", 34)]
    assert workspace.read("notes/scene.md", start_line=2, end_line=3) == "Two harbour\nthree"
    assert workspace.read("notes/scene.md", start_line=4) == "four harbour"
    assert workspace.search("HARBOUR") == [
        ("notes/scene.md", 2, "Two harbour"),
        ("notes/scene.md", 4, "four harbour"),
    ]
    workspace.delete("b.txt")
    assert [f.path for f in workspace.files()] == ["notes/scene.md"]


@pytest.mark.parametrize(
    "path",
    ["../escape.txt", "/etc/passwd", "notes/../../escape", "C:\\\\Windows\\\\x", "",
     "..", "nul\x00byte", "\\\\server\\\\share"],
)  # fmt: skip
def test_paths_that_leave_the_folder_are_refused(workspace, path):
    with pytest.raises(WorkspaceError):
        workspace.write(path, b"x")
    with pytest.raises(WorkspaceError):
        workspace.read(path)
    assert not (workspace.base / "escape.txt").exists()


def test_a_symlink_out_of_the_folder_is_neither_read_nor_listed(workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    workspace.ensure()
    os.symlink(secret, workspace.folder / "link.txt")
    os.symlink(tmp_path, workspace.folder / "outside")
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
    assert [f.path for f in workspace.files()] == ["a.bin"]  # no half-written leftovers


def test_two_sessions_have_separate_folders(tmp_path):
    first = Workspace(tmp_path, "one", quota_bytes=100)
    second = Workspace(tmp_path, "two", quota_bytes=100)
    first.write("x.txt", b"mine")
    assert second.files() == []
    with pytest.raises(WorkspaceError):
        second.read("../one/x.txt")
