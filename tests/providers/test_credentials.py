"""Saved credentials: encrypted at rest, masked everywhere, scoped to their owner, testable."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.urls import reverse

from apps.chat.council.posting import message_post
from apps.chat.models import Message, MessageStatus
from apps.chat.records.sessions import session_set_provider
from apps.providers import crypto
from apps.providers.emulator import Script
from apps.providers.models import Credential
from apps.providers.services import credential_save, credential_test, credentials_rotate

SECRET = "sk-ant-test-SECRET-0123456789-wxyz"


@pytest.fixture
def credential(alice, emulator):
    return credential_save(
        owner=alice, name="Emulated Anthropic", provider="anthropic",
        base_url=emulator.url, api_key=SECRET,
    )  # fmt: skip


@pytest.fixture
def as_alice(alice):
    client = Client()
    client.force_login(alice)
    return client


def test_the_database_holds_only_ciphertext(credential):
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key_encrypted, key_last4 FROM providers_credential")
        stored, last4 = cursor.fetchone()
    assert SECRET not in stored
    assert last4 == "wxyz"
    assert Credential.objects.get().api_key() == SECRET


def test_the_key_never_appears_in_pages_admin_logs_or_errors(
    credential, as_alice, alice, caplog, settings, emulator
):
    caplog.set_level(logging.DEBUG)
    alice.is_staff = alice.is_superuser = True
    alice.save()
    pages = [
        reverse("providers:credential_list"),
        reverse("providers:credential_edit", kwargs={"credential": credential.public_id}),
        reverse("admin:providers_credential_changelist"),
        reverse("admin:providers_credential_change", args=[credential.pk]),
    ]
    for url in pages:
        body = as_alice.get(url).content.decode()
        assert SECRET not in body and credential.api_key_encrypted not in body, url
        assert "••••wxyz" in body, url
    # A failing test call: the message and the logs name the problem, not the key.
    emulator.invalid_keys.add(SECRET)
    try:
        check = credential_test(credential=credential)
    finally:
        emulator.invalid_keys.discard(SECRET)
    assert not check.ok and "refused" in check.message
    assert SECRET not in check.message
    assert SECRET not in str(credential) and SECRET not in repr(credential)
    assert SECRET not in caplog.text


def test_a_credential_test_lists_the_models(credential, as_alice):
    response = as_alice.post(
        reverse("providers:credential_test", kwargs={"credential": credential.public_id})
    )
    assert "Connected: 2 models available." in response.content.decode()
    options = as_alice.get(
        reverse("providers:credential_models"), {"credential": credential.public_id}
    ).content.decode()
    assert '<option value="claude-sonnet-5"' in options


def test_a_wrong_base_url_and_an_unreachable_server_get_clear_messages(alice):
    from config.embedded_redis import free_port

    unreachable = credential_save(
        owner=alice, name="Down", provider="openai_compatible",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
    )  # fmt: skip
    check = credential_test(credential=unreachable)
    assert not check.ok and "Cannot reach" in check.message


def test_invalid_input_is_refused_with_field_errors(alice):
    with pytest.raises(ValidationError) as caught:
        credential_save(owner=alice, name="Local", provider="openai_compatible")
    assert "base URL" in str(caught.value)
    with pytest.raises(ValidationError, match="needs an API key"):
        credential_save(owner=alice, name="No key", provider="anthropic")
    credential_save(owner=alice, name="Twice", provider="demo")
    with pytest.raises(ValidationError, match="already have"):
        credential_save(owner=alice, name="Twice", provider="demo")


def test_editing_without_a_key_keeps_the_saved_key(credential, as_alice):
    url = reverse("providers:credential_edit", kwargs={"credential": credential.public_id})
    response = as_alice.post(
        url,
        {
            "name": "Renamed",
            "provider": "anthropic",
            "base_url": credential.base_url,
            "api_key": "",
        },
    )
    assert response.status_code == 302
    credential.refresh_from_db()
    assert credential.name == "Renamed" and credential.api_key() == SECRET


def test_strangers_get_404_for_every_credential_url(credential, bob):
    client = Client()
    client.force_login(bob)
    for name in ("credential_edit", "credential_test", "credential_delete"):
        url = reverse(f"providers:{name}", kwargs={"credential": credential.public_id})
        response = client.post(url) if name != "credential_edit" else client.get(url)
        assert response.status_code == 404, name
    models = client.get(
        reverse("providers:credential_models"), {"credential": credential.public_id}
    )
    assert models.status_code == 404
    assert Credential.objects.filter(pk=credential.pk).exists()
    assert SECRET not in client.get(reverse("providers:credential_list")).content.decode()


def test_keys_rotate_to_a_new_encryption_key(credential, settings):
    from cryptography.fernet import Fernet

    old_token = Credential.objects.get().api_key_encrypted
    settings.PARLEY_ENCRYPTION_KEYS = [
        Fernet.generate_key().decode(),
        *settings.PARLEY_ENCRYPTION_KEYS,
    ]
    assert credentials_rotate() == 1
    settings.PARLEY_ENCRYPTION_KEYS = settings.PARLEY_ENCRYPTION_KEYS[:1]  # old key retired
    rotated = Credential.objects.get()
    assert rotated.api_key_encrypted != old_token
    assert rotated.api_key() == SECRET
    with pytest.raises(crypto.SecretUnreadable):
        crypto.decrypt(old_token)


@pytest.mark.django_db(transaction=True)
def test_a_reply_streams_from_the_provider_of_the_sessions_credential(
    alice, alice_thread, credential, celery_worker, emulator
):
    import time

    session_set_provider(
        session=alice_thread.session, credential=credential, model="claude-sonnet-5"
    )
    emulator.script(Script(text="Hello from a **real** adapter.", provider="anthropic"))
    posted = message_post(thread=alice_thread, author=alice, text="Hi there")
    reply = posted.replies[0]
    for _ in range(100):
        reply.refresh_from_db()
        if reply.status not in (MessageStatus.QUEUED, MessageStatus.STREAMING):
            break
        time.sleep(0.1)
    assert (reply.status, reply.provider, reply.model) == ("done", "anthropic", "claude-sonnet-5")
    assert reply.text == "Hello from a **real** adapter."
    assert reply.usage["output"] > 0
    sent = emulator.requests[-1]
    assert (
        sent.headers.get("authorization") == f"Bearer {SECRET}"
        or sent.headers.get("x-api-key") == SECRET
    )
    assert sent.body["messages"][0]["content"][0]["text"] == "[User]: Hi there"
    assert Message.objects.filter(thread=alice_thread).count() == 2


def test_the_key_never_appears_in_exports_or_settings(alice, alice_thread, credential, as_alice):
    session_set_provider(session=alice_thread.session, credential=credential, model="m")
    message_post(thread=alice_thread, author=alice, text="hello")
    export = reverse("chat:thread_export", kwargs={"thread": alice_thread.public_id})
    for url in (
        export + "?format=md",
        export + "?format=json",
        reverse("chat:session_settings", kwargs={"session": alice_thread.session.public_id}),
        reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id}),
    ):
        assert SECRET not in as_alice.get(url).content.decode(), url
