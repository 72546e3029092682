"""The workspace through Parley: the Files panel's views and the roles' file tools."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from apps.chat.council.tools import ToolContext, ToolRefused, run_tool
from apps.chat.records.sessions import session_workspace
from apps.providers.types import ToolCall

pytestmark = pytest.mark.django_db


def context_for(thread, handle="visual_architect", can_write=False) -> ToolContext:
    return ToolContext(
        session_id=thread.session_id, thread_id=thread.pk, reply_pk=0,
        role_handle=handle, can_write=can_write,
    )  # fmt: skip


def call(name, **arguments) -> ToolCall:
    return ToolCall(id="t1", name=name, arguments=arguments)


def url(name, session, **query):
    return reverse(f"chat:{name}", kwargs={"session": session.public_id})


def test_upload_list_download_delete_and_strangers_get_nothing(alice_thread, bob):
    session = alice_thread.session
    client = Client()
    client.force_login(session.owner)
    upload = [SimpleUploadedFile("scene.md", b"# Harbour\nThe bell rings."),
              SimpleUploadedFile("../../evil.txt", b"x")]  # fmt: skip
    response = client.post(url("files_upload", session), {"files": upload}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    # Django keeps only the base name of an uploaded file; nothing lands outside anyway.
    assert "scene.md" in body and "evil.txt" in body and "Files in the workspace" in body
    assert {f.path for f in session_workspace(session).files()} == {"scene.md", "evil.txt"}
    download = client.get(url("files_download", session) + "?path=scene.md")
    assert download.status_code == 200 and b"".join(download.streaming_content).startswith(b"# Har")
    assert client.get(url("files_download", session) + "?path=../x").status_code == 400
    stranger = Client()
    stranger.force_login(bob)
    for name, method in (("files_panel", "get"), ("files_download", "get"),
                         ("files_upload", "post"), ("files_delete", "post")):  # fmt: skip
        data = {"path": "scene.md"} if method == "post" else None
        response = getattr(stranger, method)(url(name, session) + "?path=scene.md", data)
        assert response.status_code == 404
    response = client.post(
        url("files_delete", session), {"path": "scene.md"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert [f.path for f in session_workspace(session).files()] == ["evil.txt"]


def test_uploads_keep_their_folder_paths_inside_the_workspace_only(alice_thread):
    session = alice_thread.session
    client = Client()
    client.force_login(session.owner)
    upload = [SimpleUploadedFile("dawn.md", b"# Dawn"), SimpleUploadedFile("evil.md", b"x"),
              SimpleUploadedFile("abs.md", b"x")]  # fmt: skip
    paths = ["act-1/scenes/dawn.md", "act-1/../../evil.md", "/etc/abs.md"]
    response = client.post(url("files_upload", session), {"files": upload, "paths": paths},
                           HTTP_HX_REQUEST="true")  # fmt: skip
    body = response.content.decode()
    assert (
        response.status_code == 422
        and "not a valid path" in body
        and "inside the workspace" in body
    )
    assert [f.path for f in session_workspace(session).files()] == ["act-1/scenes/dawn.md"]
    # "Into folder" prefixes every path, and is checked the same way.
    note = SimpleUploadedFile("idea.md", b"Fog")
    client.post(url("files_upload", session), {"files": [note], "folder": "notes/"},
                HTTP_HX_REQUEST="true")  # fmt: skip
    assert "notes/idea.md" in {f.path for f in session_workspace(session).files()}
    sneaky = SimpleUploadedFile("x.md", b"x")
    response = client.post(url("files_upload", session), {"files": [sneaky], "folder": "../up"},
                           HTTP_HX_REQUEST="true")  # fmt: skip
    assert response.status_code == 422
    assert len(session_workspace(session).files()) == 2


def test_an_upload_over_the_quota_is_refused_and_keeps_nothing(alice_thread, settings):
    settings.PARLEY_WORKSPACE_QUOTA_MB = 1
    session = alice_thread.session
    client = Client()
    client.force_login(session.owner)
    big = SimpleUploadedFile("big.bin", b"x" * (1024 * 1024 + 1))
    response = client.post(url("files_upload", session), {"files": [big]}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422 and "quota" in response.content.decode()
    assert session_workspace(session).files() == []
    assert client.post(url("files_upload", session), {}, HTTP_HX_REQUEST="true").status_code == 422


def test_the_file_tools_read_search_and_write_with_permissions(alice_thread):
    workspace = session_workspace(alice_thread.session)
    workspace.write("scene.md", b"one\ntwo bell\nthree")
    workspace.write("notes.txt", b"the bell again")
    reader = context_for(alice_thread)
    assert "scene.md (18 bytes)" in run_tool(reader, call("list_files"))
    assert (
        run_tool(reader, call("read_file", path="scene.md", start_line=2, end_line=2)) == "two bell"
    )
    hits = run_tool(reader, call("search_files", query="BELL"))
    assert hits == "notes.txt:1: the bell again\nscene.md:2: two bell"
    both = run_tool(reader, call("read_files", paths=["scene.md", "missing.md"]))
    assert "=== scene.md ===\none" in both and "=== missing.md ===\nError: There is no file" in both
    with pytest.raises(ToolRefused, match="may not use write_file"):
        run_tool(reader, call("write_file", path="new.md", content="hi"))
    writer = context_for(alice_thread, "assistant", can_write=True)
    assert run_tool(writer, call("write_file", path="drafts/new.md", content="hi")) == (
        "Wrote drafts/new.md (2 bytes)."
    )
    with pytest.raises(ValueError, match=r"leads outside|not a valid path"):
        run_tool(writer, call("write_file", path="../../etc/x", content="hi"))
    with pytest.raises(ValueError, match="line number"):
        run_tool(reader, call("read_file", path="scene.md", start_line=0))
