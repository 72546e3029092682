"""Imports through the token API and `parley import FILE` (a real daphne and worker)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.api.tokens import token_create
from apps.chat.models import Session
from apps.imports.models import ImportJob
from parley_cli.main import main
from tests.api.test_api import bearer, get, post
from tests.conftest import wait_until
from tests.imports.exports import chatgpt_trip, claude_conversation, write_json

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_api_previews_starts_and_reports_an_import(alice, bob, celery_worker):
    raw = token_create(user=alice, name="laptop", scope="post")[1]
    reader = token_create(user=alice, name="reader", scope="read")[1]
    data = json.dumps([chatgpt_trip("c-api"), claude_conversation()]).encode()
    form = {"file": SimpleUploadedFile("c.json", data)}
    sent = Client().post("/api/v1/imports", form, **bearer(raw))
    assert sent.status_code == 202, sent.content
    job_id = sent.json()["id"]
    wait_until(
        lambda: get(f"/api/v1/imports/{job_id}", raw).json()["status"] == "ready", timeout=30
    )
    job = get(f"/api/v1/imports/{job_id}", raw).json()
    assert job["preview"]["conversations"] == 2 and job["roles"] == {
        "gpt-4o": "new", "o3": "new", "Claude": "new"}  # fmt: skip
    # A read-only token reads but does not start; someone else's import is not found.
    assert post(f"/api/v1/imports/{job_id}/start", reader, {"roles": {}}).status_code == 403
    bob_raw = token_create(user=bob, name="bob", scope="post")[1]
    assert get(f"/api/v1/imports/{job_id}", bob_raw).status_code == 404
    refused = post(f"/api/v1/imports/{job_id}/start", raw, {"roles": {"o3": "nobody"}})
    assert refused.status_code == 409 and refused.json()["field"] == "roles"

    started = post(f"/api/v1/imports/{job_id}/start", raw, {"roles": {"o3": "new"}})
    assert started.status_code == 202 and started.json()["status"] == "importing"
    wait_until(lambda: get(f"/api/v1/imports/{job_id}", raw).json()["status"] == "done", timeout=30)
    report = get(f"/api/v1/imports/{job_id}", raw).json()["report"]
    assert len(report["sessions"]) == 2 and report["already"] == 0
    assert [job["id"] for job in get("/api/v1/imports", raw).json()] == [job_id]
    empty = Client().post(
        "/api/v1/imports", {"file": SimpleUploadedFile("e.json", b"")}, **bearer(raw)
    )
    assert empty.status_code == 422 and empty.json()["detail"] == "That file is empty."


@pytest.fixture
def config(alice, asgi_server, monkeypatch):
    raw = token_create(user=alice, name="terminal", scope="post")[1]
    monkeypatch.setenv("PARLEY_URL", asgi_server.url)
    monkeypatch.setenv("PARLEY_TOKEN", raw)
    monkeypatch.setenv("PARLEY_CONFIG", "/nonexistent/parley.json")


def test_parley_import_shows_the_preview_asks_and_imports(
    alice, config, tmp_path, capsys, monkeypatch
):
    path = write_json(
        tmp_path / "conversations.json", [chatgpt_trip("c-cli"), claude_conversation()]
    )
    monkeypatch.setattr("builtins.input", lambda question: "n")
    assert main(["import", str(path)]) == 1
    out = capsys.readouterr().out
    assert "ChatGPT (1), Claude (1): 2 conversations to import, 9 messages, 2 branches" in out
    assert "Left out: tool output (code runs, searches, browsing) (1)" in out
    assert "Nothing imported." in out and not Session.objects.filter(owner=alice).exists()
    assert ImportJob.objects.get().status == "cancelled"

    assert main(["import", str(path), "--yes", "--role", "Claude=new"]) == 0
    out = capsys.readouterr().out
    assert "Done: 2 sessions made, 0 already imported before." in out
    assert set(Session.objects.filter(owner=alice).values_list("name", flat=True)) == {
        "Lisbon trip", "Sonnet about rain"}  # fmt: skip
    assert main(["import", str(path), "--yes"]) == 0
    assert "Nothing new to import." in capsys.readouterr().out
    assert main(["import", str(tmp_path / "missing.json")]) == 2
    assert "Cannot read" in capsys.readouterr().err
