"""What ending a sign-in does to the live side (issue 49): signing out closes that browser's
tabs and leaves the person's other browsers open; a disabled account's tabs all close at once
(the browser test in test_provider_sign_in.py follows one through Chromium). And a provider
that cannot be read, or whose discovery document names another issuer, ends a sign-in with a
plain sentence instead of an error page."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from apps.accounts.oidc import discovery
from apps.chat.display import events
from tests.chat.probes import frames_before_probe
from tests.chat.test_away import open_page
from tests.chat.test_live_streaming import open_tab, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)
CLOSE_SIGNED_OUT = 4401


def _signed_in(user) -> tuple[Client, bytes]:
    client = Client()
    client.force_login(user)
    return client, f"sessionid={client.cookies['sessionid'].value}".encode()


async def _closed_with(communicator) -> int:
    async with asyncio.timeout(10):
        while True:
            output = await communicator.receive_output(timeout=10)
            if output["type"] == "websocket.close":
                return output["code"]


async def test_signing_out_closes_that_browsers_tabs_only(alice, alice_thread, celery_worker):
    here, here_cookie = await database_sync_to_async(_signed_in)(alice)
    elsewhere_cookie = await database_sync_to_async(session_cookie)(alice)
    thread_tab = await open_tab(here_cookie, alice_thread)
    list_tab = await open_page(here_cookie)
    other_browser = await open_tab(elsewhere_cookie, alice_thread)
    await frames_before_probe(thread_tab, events.user_group(alice.pk))  # all three follow
    answer = await database_sync_to_async(here.post)("/logout/")
    assert answer.status_code == 302
    assert await _closed_with(thread_tab) == CLOSE_SIGNED_OUT
    assert await _closed_with(list_tab) == CLOSE_SIGNED_OUT
    # The other browser's tab is still open and still told things.
    await frames_before_probe(other_browser, events.user_group(alice.pk))
    for tab in (thread_tab, list_tab, other_browser):
        await tab.disconnect()  # (a closed one leaves the process's open tabs)


async def test_disabling_an_account_closes_all_its_tabs(alice, bob, alice_thread, celery_worker):
    tabs = [await open_tab(await database_sync_to_async(session_cookie)(alice), alice_thread)
            for _ in range(2)]  # fmt: skip
    bob_page = await open_page(await database_sync_to_async(session_cookie)(bob))
    for tab in tabs:
        await frames_before_probe(tab, events.user_group(alice.pk))

    def disable() -> None:
        alice.last_login = None
        alice.save(update_fields=["last_login"])  # any other save leaves the tabs alone
        alice.is_active = False
        alice.save()

    await database_sync_to_async(disable)()
    for tab in tabs:
        assert await _closed_with(tab) == CLOSE_SIGNED_OUT
    await frames_before_probe(bob_page, events.user_group(bob.pk))  # nobody else's
    for tab in (*tabs, bob_page):
        await tab.disconnect()  # (a closed one leaves the process's open tabs)


class _Issuer(BaseHTTPRequestHandler):
    claimed = "http://127.0.0.1:1/someone-else"

    def do_GET(self) -> None:
        document = {"issuer": self.claimed, "authorization_endpoint": "http://x/auth",
                    "token_endpoint": "http://x/token", "jwks_uri": "http://x/jwks"}  # fmt: skip
        body = json.dumps(document)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("provider", ["down", "another issuer"])
def test_a_provider_that_cannot_be_trusted_or_reached_ends_the_sign_in_plainly(
    provider, settings, client
):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Issuer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    if provider == "down":
        server.shutdown()
        server.server_close()
    settings.PARLEY_OIDC_ISSUER = f"http://127.0.0.1:{port}"
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "parley", "secret"
    discovery.forget()
    try:
        answer = client.get("/login/provider/")
        assert answer.status_code == 302
        assert answer["Location"] == "/login/?refused=unreachable"
        page = client.get(answer["Location"]).content.decode()
        assert "The sign-in service could not be reached" in page
    finally:
        discovery.forget()
        if provider != "down":
            server.shutdown()
            server.server_close()


def test_the_provider_pages_are_not_there_without_a_provider(client):
    assert client.get("/login/provider/").status_code == 404
    assert client.get("/login/provider/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in client.get("/login/").content.decode()
