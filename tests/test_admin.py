"""Django admin: every model's pages render for staff, role packs import, keys stay masked."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.chat.council.posting import message_post
from apps.chat.models import Message
from apps.providers.services import credential_save
from apps.roles.models import Role

pytestmark = pytest.mark.django_db
KEY = "sk-admin-secret-key-9876"


@pytest.fixture
def admin_client(alice_thread):
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-12345")
    client = Client()
    client.login(username="root", password="pw-root-12345")
    credential_save(
        owner=alice_thread.session.owner, name="Key", provider="anthropic", base_url="",
        api_key=KEY,
    )  # fmt: skip
    posted = message_post(
        thread=alice_thread, author=alice_thread.session.owner, text="@director hi"
    )
    Message.objects.filter(pk=posted.replies[0].pk).update(
        status="done", usage={"input": 7, "output": 3}, finished_at="2026-01-01T00:00:00Z"
    )
    return client


def test_every_admin_page_renders(admin_client, alice_thread):
    director = Role.objects.get(handle="director")
    message = Message.objects.filter(thread=alice_thread).first()
    pages = [
        "/admin/",
        "/admin/roles/role/",
        f"/admin/roles/role/{director.pk}/change/",
        "/admin/roles/rolegroup/",
        "/admin/roles/role/import-pack/",
        "/admin/chat/session/",
        f"/admin/chat/session/{alice_thread.session.pk}/change/",
        "/admin/chat/thread/",
        f"/admin/chat/thread/{alice_thread.pk}/change/",
        "/admin/chat/message/?status__exact=done&provider__exact=demo&speaker__exact=director",
        f"/admin/chat/message/{message.pk}/change/",
        "/admin/chat/turn/",
        "/admin/chat/threadsummary/",
        "/admin/chat/messageusage/",
        "/admin/providers/credential/",
    ]
    for url in pages:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert KEY not in response.content.decode(), url
    body = admin_client.get("/admin/roles/role/").content.decode()
    assert "border:2px solid #7c3aed" in body  # the colour preview
    usage = admin_client.get("/admin/chat/messageusage/").content.decode()
    assert "(1 replies) — input: <strong>7</strong>" in usage
    filtered = admin_client.get("/admin/chat/messageusage/?speaker__exact=nobody").content
    assert "(0 replies) — input: <strong>0</strong>" in filtered.decode()  # follows the filter
    thread_page = admin_client.get(f"/admin/chat/thread/{alice_thread.pk}/change/").content
    assert b"@director hi" in thread_page  # messages inline, read-only


def test_role_packs_import_from_the_admin(admin_client):
    response = admin_client.post(
        "/admin/roles/role/import-pack/", {"shipped": "engineering-council"}
    )
    assert response.status_code == 302
    assert Role.objects.filter(handle="lead_engineer").exists()
    upload = SimpleUploadedFile(
        "writers.yaml", b"pack: writers\nroles:\n  - {handle: poet, display_name: Poet}\n"
    )
    assert admin_client.post("/admin/roles/role/import-pack/", {"file": upload}).status_code == 302
    assert Role.objects.get(handle="poet").pack == "writers"
    bad = SimpleUploadedFile("bad.yaml", b"pack: x\nroles: [")
    response = admin_client.post("/admin/roles/role/import-pack/", {"file": bad})
    assert response.status_code == 200 and "not valid YAML" in response.content.decode()
    response = admin_client.post("/admin/roles/role/import-pack/", {})
    assert "Choose a shipped pack or upload a file" in response.content.decode()


def test_memberships_and_invites_show_in_the_admin_without_tokens(admin_client, alice_thread, bob):
    from apps.chat.records.rooms import invite_create, member_add

    session, alice = alice_thread.session, alice_thread.session.owner
    membership = member_add(session=session, by=alice, username="bob", role="viewer")
    invite, token = invite_create(session=session, by=alice)
    pages = {
        "/admin/chat/membership/": "bob",
        f"/admin/chat/membership/{membership.pk}/change/": "bob",
        "/admin/chat/roominvite/": "Invite to Alice",
        f"/admin/chat/roominvite/{invite.pk}/change/": "Invite to Alice",
        f"/admin/chat/session/{session.pk}/change/": "bob",  # the members, inline
    }
    for url, shown in pages.items():
        body = admin_client.get(url).content.decode()
        assert shown in body, url
        assert token not in body and invite.token_hash not in body, url
