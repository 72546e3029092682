"""The token API (issue 25): tokens made, scoped and revoked; every endpoint and error code;
another user's ids are 404; the OpenAPI description is generated from the code."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from apps.api.api import api
from apps.api.models import AccessToken
from apps.api.tokens import token_create, token_revoke
from apps.chat.models import Message, MessageStatus, Thread
from apps.chat.records.rooms import member_add

pytestmark = pytest.mark.django_db


def bearer(raw: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


@pytest.fixture
def poster(alice):
    return token_create(user=alice, name="laptop", scope="post")[1]


@pytest.fixture
def reader(alice):
    return token_create(user=alice, name="dashboard", scope="read")[1]


def get(url, raw, **params):
    return Client().get(url, params, **bearer(raw))


def post(url, raw, data=None):
    return Client().post(url, data or {}, content_type="application/json", **bearer(raw))


def test_the_account_page_makes_a_token_shows_it_once_and_revokes_it(alice):
    client = Client()
    client.force_login(alice)
    page = client.post(reverse("api_tokens:token_list"), {"name": "laptop", "scope": "post"})
    html = page.content.decode()
    token = AccessToken.objects.get(user=alice)
    raw = html.split('id="new-token">')[1].split("<")[0]
    assert raw.startswith("pat_") and token.prefix == raw[:12]
    assert raw not in client.get(reverse("api_tokens:token_list")).content.decode()
    assert token.token_hash != raw and raw not in str(token)
    assert get("/api/v1/sessions", raw).status_code == 200
    assert AccessToken.objects.get(pk=token.pk).last_used_at is not None
    client.post(reverse("api_tokens:token_revoke", kwargs={"token": token.pk}))
    refused = get("/api/v1/sessions", raw)
    assert refused.status_code == 401 and refused["WWW-Authenticate"] == "Bearer"
    assert "revoked" in refused.json()["detail"]
    empty = client.post(reverse("api_tokens:token_list"), {"name": " ", "scope": "post"})
    assert empty.status_code == 422 and "Name the token" in empty.content.decode()


def test_no_token_or_a_wrong_one_is_401(alice_thread):
    assert Client().get("/api/v1/sessions").status_code == 401
    assert get("/api/v1/sessions", "pat_not-a-token").status_code == 401
    assert get("/api/v1/sessions", "").status_code == 401


def test_sessions_threads_and_messages_are_listed_and_paged(alice, alice_thread, reader):
    from apps.chat.council.posting import message_post

    sessions = get("/api/v1/sessions", reader).json()
    assert [s["name"] for s in sessions] == [alice_thread.session.name]
    assert sessions[0]["access"] == "owner" and sessions[0]["provider"] == "demo"
    session_id = sessions[0]["id"]
    threads = get(f"/api/v1/sessions/{session_id}/threads", reader).json()
    assert [t["id"] for t in threads] == [str(alice_thread.public_id)]
    for n in range(3):
        posted = message_post(thread=alice_thread, author=alice, text=f"@assistant q{n}")
        Message.objects.filter(pk=posted.replies[0].pk).update(
            status=MessageStatus.DONE, content=[{"type": "text", "text": f"a{n}"}],
            usage={"input": 10, "output": 2},
        )  # fmt: skip
    url = f"/api/v1/threads/{alice_thread.public_id}/messages"
    first = get(url, reader, limit=4).json()
    assert [m["text"] for m in first["items"]] == ["@assistant q0", "a0", "@assistant q1", "a1"]
    assert first["items"][1]["speaker"] == "assistant" and first["items"][1]["usage"]["output"] == 2
    rest = get(url, reader, after=first["next_after"], limit=4).json()
    assert [m["text"] for m in rest["items"]] == ["@assistant q2", "a2"] and rest[
        "next_after"
    ] is None
    bad = get(url, reader, limit=500)
    assert bad.status_code == 400 and bad.json()["field"] == "limit"


def test_posting_routes_queues_and_refuses_bad_input_like_the_composer(alice, alice_thread, poster):
    url = f"/api/v1/threads/{alice_thread.public_id}/messages"
    made = post(url, poster, {"text": "@director @sound_designer the opening?"})
    assert made.status_code == 201
    body = made.json()
    assert [r["speaker"] for r in body["replies"]] == ["sound_designer", "director"]
    assert body["message"]["text"] == "@director @sound_designer the opening?"
    assert body["queued"] is False
    queued = post(url, poster, {"text": "and the ending?"}).json()
    assert queued["queued"] is True and queued["message"] is None
    for text, says in (
        ("   ", "write something"),
        ("x" * 100_001, "limit"),
        ("/nosuch", "command"),
    ):
        refused = post(url, poster, {"text": text})
        assert refused.status_code == 400, (text[:10], refused.content)
        assert refused.json()["field"] == "text" and says in refused.json()["detail"].lower()
    missing = post(url, poster, {})
    assert missing.status_code == 400 and missing.json()["field"] == "text"


def test_a_read_token_cannot_write_and_a_viewer_cannot_post(alice, bob, alice_thread, reader):
    url = f"/api/v1/threads/{alice_thread.public_id}/messages"
    refused = post(url, reader, {"text": "hello"})
    assert refused.status_code == 403 and "only read" in refused.json()["detail"]
    assert post("/api/v1/sessions", reader, {"name": "x"}).status_code == 403
    member_add(session=alice_thread.session, by=alice, username="bob", role="viewer")
    bobs = token_create(user=bob, name="bob", scope="post")[1]
    assert get(url, bobs).status_code == 200  # a viewer reads
    viewer = post(url, bobs, {"text": "hello"})
    assert viewer.status_code == 403 and "viewer" in viewer.json()["detail"]


def test_another_users_ids_are_404_and_change_nothing(alice_thread, bob):
    from apps.chat.council.posting import message_post

    posted = message_post(thread=alice_thread, author=alice_thread.session.owner, text="hi")
    bobs = token_create(user=bob, name="bob", scope="post")[1]
    t, s = alice_thread.public_id, alice_thread.session.public_id
    reply = posted.replies[0].public_id
    for method, url in [
        (get, f"/api/v1/sessions/{s}/threads"),
        (post, f"/api/v1/sessions/{s}/threads"),
        (get, f"/api/v1/threads/{t}/messages"),
        (post, f"/api/v1/threads/{t}/messages"),
        (post, f"/api/v1/threads/{t}/stop"),
        (get, f"/api/v1/threads/{t}/events"),
        (post, f"/api/v1/messages/{reply}/retry"),
        (post, f"/api/v1/messages/{reply}/regenerate"),
    ]:
        response = method(url, bobs) if method is get else method(url, bobs, {"text": "x"})
        assert response.status_code == 404, (url, response.status_code)
    assert get("/api/v1/sessions", bobs).json() == []
    assert Message.objects.filter(thread=alice_thread).count() == 2
    assert Thread.objects.filter(session=alice_thread.session).count() == 1


def test_stop_retry_and_regenerate_with_409_for_a_conflict(alice, alice_thread, poster):
    from apps.chat.council.posting import message_post

    reply = message_post(thread=alice_thread, author=alice, text="@assistant hi").replies[0]
    running = post(f"/api/v1/messages/{reply.public_id}/regenerate", poster)
    assert running.status_code == 409 and "still running" in running.json()["detail"]
    assert post(f"/api/v1/threads/{alice_thread.public_id}/stop", poster).json() == {"ok": True}
    reply.refresh_from_db()
    assert reply.status == MessageStatus.INTERRUPTED
    retried = post(f"/api/v1/messages/{reply.public_id}/retry", poster)
    assert retried.status_code == 200 and retried.json()["status"] == "queued"
    Message.objects.filter(pk=reply.pk).update(
        status=MessageStatus.DONE, content=[{"type": "text", "text": "Hello."}]
    )
    not_failed = post(f"/api/v1/messages/{reply.public_id}/retry", poster)
    assert not_failed.status_code == 409 and "regenerate" in not_failed.json()["detail"]
    regenerated = post(f"/api/v1/messages/{reply.public_id}/regenerate", poster)
    assert regenerated.status_code == 200 and regenerated.json()["status"] == "queued"


def test_create_a_session_and_a_thread(alice, poster):
    made = post("/api/v1/sessions", poster, {"name": "From a script", "roles": ["director"]})
    assert made.status_code == 201 and made.json()["name"] == "From a script"
    unknown = post("/api/v1/sessions", poster, {"name": "x", "roles": ["nobody"]})
    assert unknown.status_code == 404 and unknown.json()["field"] == "roles"
    thread = post(f"/api/v1/sessions/{made.json()['id']}/threads", poster)
    assert thread.status_code == 201


def test_too_many_requests_is_429_with_retry_after(alice, reader, monkeypatch):
    (throttle,) = api.throttle
    monkeypatch.setattr(throttle, "num_requests", 2)
    codes = [get("/api/v1/sessions", reader).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    refused = get("/api/v1/sessions", reader)
    assert int(refused["Retry-After"]) >= 1 and "try again" in refused.json()["detail"]
    token_revoke(token=AccessToken.objects.get(user=alice))


def test_the_openapi_description_is_generated_from_the_code():
    schema = Client().get("/api/v1/schema").json()
    paths = schema["paths"]
    for path in (
        "/api/v1/sessions", "/api/v1/sessions/{session_id}/threads",
        "/api/v1/threads/{thread_id}/messages", "/api/v1/threads/{thread_id}/stop",
        "/api/v1/threads/{thread_id}/events", "/api/v1/messages/{message_id}/retry",
        "/api/v1/messages/{message_id}/regenerate",
    ):  # fmt: skip
        assert path in paths, path
    post_op = paths["/api/v1/threads/{thread_id}/messages"]["post"]
    assert {"201", "400", "401", "403", "404", "429"} <= set(post_op["responses"])
    assert schema["components"]["securitySchemes"]["TokenAuth"]["scheme"] == "bearer"


def test_a_session_lists_its_roles_and_commands_and_a_thread_its_queue(alice, alice_thread, poster):
    session = get(f"/api/v1/sessions/{alice_thread.session.public_id}", poster).json()
    handles = [role["handle"] for role in session["roles"]]
    assert "director" in handles and session["roles"][0]["colour"].startswith("#")
    assert {"help", "whisper"} <= {command["name"] for command in session["commands"]}
    url = f"/api/v1/threads/{alice_thread.public_id}"
    assert get(url, poster).json()["queue"] == []
    post(url + "/messages", poster, {"text": "@assistant first"})
    post(url + "/messages", poster, {"text": "then this"})
    status = get(url, poster).json()
    assert [item["text"] for item in status["queue"]] == ["then this"]
    assert status["latest_seq"] == 2


def test_the_docs_page_uses_the_bundled_swagger_ui():
    page = Client().get("/api/v1/docs")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui-bundle.js" in html and "cdn." not in html


def test_every_error_under_the_api_is_json_with_detail_and_field(alice, alice_thread, poster):
    """What Django answers before the API's code runs, too (issue 33 items 6 and 7)."""
    client = Client()
    unknown = client.get("/api/v1/nothing/here", **bearer(poster))
    assert unknown.status_code == 404 and set(unknown.json()) == {"detail", "field"}
    wrong_method = client.delete("/api/v1/sessions", **bearer(poster))
    assert (
        wrong_method.status_code == 405 and "DELETE is not allowed" in wrong_method.json()["detail"]
    )
    huge = client.post(
        f"/api/v1/threads/{alice_thread.public_id}/messages", data="x" * 3_000_000,
        content_type="application/json", **bearer(poster),
    )  # fmt: skip
    assert huge.status_code == 413 and huge.json()["field"] == "body"
    for body, detail in (("[null, null]", "must be a JSON object"), ("{nope", "not valid JSON")):
        bad = client.post("/api/v1/sessions", data=body, content_type="application/json",
                          **bearer(poster))  # fmt: skip
        assert bad.status_code == 400 and bad.json()["field"] == "body", bad.content
        assert detail in bad.json()["detail"]
    # A NUL or a lone surrogate in a role handle, a token name: 4xx, never 500.
    for roles in (["dir\x00ector"], ["\ud800"]):
        answer = client.post("/api/v1/sessions", data={"roles": roles},
                             content_type="application/json", **bearer(poster))  # fmt: skip
        assert answer.status_code == 400 and answer.json()["field"] == "roles"
    unknown_role = client.post("/api/v1/sessions", data={"roles": ["nobody"]},
                               content_type="application/json", **bearer(poster))  # fmt: skip
    assert unknown_role.status_code == 404 and unknown_role.json()["field"] == "roles"
    assert token_create(user=alice, name="lap\x00top", scope="read")[0].name == "lap\ufffdtop"
    reply = post(f"/api/v1/threads/{alice_thread.public_id}/messages", poster,
                 {"text": "@assistant hi"}).json()["replies"][0]  # fmt: skip
    running = post(f"/api/v1/messages/{reply['id']}/regenerate", poster)
    assert running.status_code == 409 and running.json()["field"] == "message_id"
    empty = post(f"/api/v1/threads/{alice_thread.public_id}/messages", poster, {"text": ""})
    assert empty.status_code == 400 and empty.json()["field"] == "text"
    for limit in (0, 201, 364803):
        page = get(f"/api/v1/threads/{alice_thread.public_id}/messages", poster, limit=limit)
        assert page.status_code == 400 and page.json()["field"] == "limit"
