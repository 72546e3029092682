"""The library through the API and `parley library` (against a real daphne and worker):
documents added, read in the background, listed with their state, removed; the room's and
the token's rules apply."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.api.tokens import token_create
from apps.chat.records.rooms import member_add
from apps.chat.records.sessions import session_create
from apps.library.models import Document
from parley_cli.main import main
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
GUIDE = b"# Harbour guide\n\n## Tides\n\nBoats moor at the north quay when the tide turns.\n"


def bearer(raw: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def test_the_api_adds_lists_and_removes_documents(alice, bob, charlie, roles, celery_worker):
    session = session_create(owner=alice, name="Harbour", roles=roles)
    member_add(session=session, by=alice, username="charlie", role="viewer")
    raw = token_create(user=alice, name="laptop", scope="post")[1]
    reader = token_create(user=alice, name="reader", scope="read")[1]
    viewer = token_create(user=charlie, name="viewer", scope="post")[1]
    stranger = token_create(user=bob, name="bob", scope="post")[1]
    url = f"/api/v1/sessions/{session.public_id}/library"
    sent = Client().post(url, {"files": [SimpleUploadedFile("guide.md", GUIDE)]}, **bearer(raw))
    assert sent.status_code == 201, sent.content
    (document,) = sent.json()
    assert document["name"] == "guide.md" and document["state"] in ("queued", "indexing", "ready")
    wait_until(lambda: Client().get(url, **bearer(raw)).json()[0]["state"] == "ready")
    listed = Client().get(url, **bearer(viewer)).json()  # a viewer reads it
    assert listed[0]["passages"] == 1 and listed[0]["error"] == ""
    again = Client().post(url, {"files": [SimpleUploadedFile("g.md", GUIDE)]}, **bearer(raw))
    assert again.status_code == 422 and "already" in again.json()["detail"]
    one = {"files": [SimpleUploadedFile("x.md", b"# x")]}
    assert Client().post(url, one, **bearer(reader)).status_code == 403  # a read token
    assert Client().post(url, one, **bearer(viewer)).status_code == 403  # a viewer
    assert Client().get(url, **bearer(stranger)).status_code == 404  # not in the room
    gone = Client().delete(f"{url}/{document['id']}", **bearer(raw))
    assert gone.status_code == 204 and not Document.objects.exists()


def test_parley_library_adds_waits_for_the_reading_and_lists(
    alice, roles, celery_worker, asgi_server, monkeypatch, tmp_path, capsys
):
    session_create(owner=alice, name="Harbour", roles=roles)
    monkeypatch.setenv("PARLEY_URL", asgi_server.url)
    monkeypatch.setenv("PARLEY_TOKEN", token_create(user=alice, name="t", scope="post")[1])
    monkeypatch.setenv("PARLEY_CONFIG", "/nonexistent/parley.json")
    (tmp_path / "guide.md").write_bytes(GUIDE)
    (tmp_path / "scan.jpg").write_bytes(b"\xff\xd8\xff")
    files = [str(tmp_path / "guide.md"), str(tmp_path / "scan.jpg")]
    assert main(["library", "add", *files, "--session", "Harbour"]) == 1  # one was refused
    said = capsys.readouterr().out
    assert "guide.md: 1 passage" in said and "scan.jpg: not added — " in said
    assert main(["library", "list", "--session", "Harbour"]) == 0
    assert "guide.md: 1 passage" in capsys.readouterr().out


def test_the_api_and_parley_library_search_as_the_roles_do(
    alice, bob, roles, celery_worker, asgi_server, monkeypatch, capsys
):
    session = session_create(owner=alice, name="Harbour", roles=roles)
    raw = token_create(user=alice, name="laptop", scope="read")[1]
    stranger = token_create(user=bob, name="bob", scope="read")[1]
    manual = b"# Boiler\n\n## Error codes\n\nCode F28 means the boiler failed to ignite."
    Client(**bearer(token_create(user=alice, name="w", scope="post")[1])).post(
        f"/api/v1/sessions/{session.public_id}/library",
        {"files": [SimpleUploadedFile("boiler.md", manual)]},
    )
    wait_until(lambda: Document.objects.filter(state="ready", vectors_done=1).exists())
    url = f"/api/v1/sessions/{session.public_id}/library/search"
    found = Client().get(url, {"q": "why will the heater not light?"}, **bearer(raw))
    assert found.status_code == 200, found.content
    (passage,) = found.json()  # found by meaning: no word of the question is in it
    assert passage["document_name"] == "boiler.md" and passage["heading"] == "Boiler > Error codes"
    assert passage["mark"].startswith("L") and "F28" in passage["text"]
    assert passage["url"].endswith("/passages/0/")
    listed = Client().get(f"/api/v1/sessions/{session.public_id}/library", **bearer(raw)).json()
    assert listed[0]["vectors"] == "local:all-MiniLM-L6-v2" and listed[0]["vectors_done"] == 1
    empty = Client().get(url, {"q": ""}, **bearer(raw))
    assert empty.status_code == 400 and "q" in empty.json()["field"]
    assert Client().get(url, {"q": " "}, **bearer(raw)).json() == []  # no words: nothing
    assert Client().get(url, {"q": "x", "limit": 0}, **bearer(raw)).status_code == 400
    assert Client().get(url, {"q": "boiler"}, **bearer(stranger)).status_code == 404

    monkeypatch.setenv("PARLEY_URL", asgi_server.url)
    monkeypatch.setenv("PARLEY_TOKEN", raw)
    monkeypatch.setenv("PARLEY_CONFIG", "/nonexistent/parley.json")
    assert main(["library", "search", "boiler", "failed", "--session", "Harbour"]) == 0
    said = capsys.readouterr().out
    assert f"[{passage['mark']}] boiler.md — Boiler > Error codes" in said and "F28" in said
    assert main(["library", "search", "helicopter rotor", "--session", "Harbour"]) == 1
    assert "Nothing in the library of Harbour answers that." in capsys.readouterr().out


def test_a_replys_citations_reach_the_api_and_the_terminal_checked(alice, roles, settings):
    from apps.chat.council.posting import message_post
    from apps.chat.models import Message, MessageStatus
    from apps.library.models import Chunk
    from apps.library.services import document_create, document_index
    from parley_cli.ask import with_citations

    settings.PARLEY_LIBRARY_VECTORS = "off"
    session = session_create(owner=alice, name="Harbour", roles=roles)
    document_index(document=document_create(session=session, by=alice, name="guide.md",
                                            data=GUIDE), data=GUIDE)  # fmt: skip
    mark = f"L{Chunk.objects.get().pk}"
    posted = message_post(thread=session.active_thread, author=alice, text="@director where?")
    said = (f"“Boats moor at the north quay” [{mark}], not “at the south pier” [{mark}]. "
            "And [L999999] is nobody's.")  # fmt: skip
    Message.objects.filter(pk=posted.replies[0].pk).update(
        status=MessageStatus.DONE, content=[{"type": "text", "text": said}]
    )
    raw = token_create(user=alice, name="t", scope="read")[1]
    page = Client().get(f"/api/v1/threads/{session.active_thread.public_id}/messages",
                        **bearer(raw)).json()  # fmt: skip
    reply = next(item for item in page["items"] if item["speaker"] != "user")
    (cited,) = reply["citations"]
    assert (cited["number"], cited["mark"], cited["document_name"]) == (1, mark, "guide.md")
    assert [(q["quote"], q["verified"]) for q in cited["quotes"]] == [
        ("Boats moor at the north quay", True), ("at the south pier", False)]  # fmt: skip
    assert cited["url"].endswith("/passages/0/")
    shown = with_citations(reply["text"], reply["citations"])
    assert "quay” [1], not" in shown and "[L999999]" in shown  # a stranger's mark as written
    assert (
        "[1] guide.md" in shown and "“at the south pier” ⚠ not found in the cited passage" in shown
    )
    assert "“Boats moor at the north quay” ✓" in shown
