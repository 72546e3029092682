"""Sign-in through the team's OpenID Connect provider (issue 49), end to end in Chromium
against a real provider (the npm `oidc-provider`): accounts created or matched by verified
e-mail and linked to the provider's subject, allowed domains and groups, sign-out at the
provider, local passwords switched off, and every forged or stale answer refused with a plain
sentence: a state this browser did not start, an expired or replayed code, an ID token for
another client. A disabled person's tabs and live streams end at once."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import expect

from apps.accounts.models import ProviderIdentity
from apps.accounts.oidc import discovery
from apps.accounts.oidc.views import REASONS
from apps.api.tokens import token_create
from apps.chat.records.sessions import session_create
from tests.accounts.provider import CLIENT_ID, CLIENT_SECRET, Provider
from tests.api.test_stream import events
from tests.api.test_stream_limits import client_stream
from tests.browser.test_live_chat import PASSWORD, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
OUTSIDE = re.compile(r"^https?://(?!127\.0\.0\.1[:/])")  # the provider's pages load web fonts


@pytest.fixture
def op(asgi_server, tmp_path, settings):
    provider = Provider(parley_url=asgi_server.url, folder=tmp_path)
    settings.PARLEY_OIDC_ISSUER = provider.issuer
    settings.PARLEY_OIDC_NAME = "Acme"
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    discovery.forget()
    provider.add_account("ann", email="ann@acme.test", preferred_username="ann",
                         given_name="Ann", groups=["staff"])  # fmt: skip
    yield provider
    provider.stop()
    discovery.forget()


@pytest.fixture
def browser_page(page):
    page.context.route(OUTSIDE, lambda route: route.abort())
    yield page
    page.context.unroute_all(behavior="ignoreErrors")


def start_sign_in(page, op, login: str) -> None:
    """From Parley's sign-in page through the provider's form, up to the redirect back (as
    someone new at the provider: whoever signed in there before in this browser is forgotten,
    and so is Parley's session, on the same host)."""
    page.context.clear_cookies()
    page.goto("/login/")
    page.get_by_role("link", name="Sign in with Acme").click()
    page.wait_for_url(f"{op.issuer}/interaction/**")
    page.locator("input[name=login]").fill(login)
    page.locator("input[name=password]").fill("whatever the provider asks")
    page.locator("button[type=submit]").click()


def sign_in(page, op, login: str) -> None:
    start_sign_in(page, op, login)
    expect(page.get_by_role("heading", name="Your sessions")).to_be_visible()


def sign_out(page) -> None:
    page.get_by_label(re.compile("Account menu")).click()
    page.get_by_role("button", name="Log out").click()


def expect_refused(page, reason: str) -> None:
    expect(page.get_by_role("alert")).to_have_text(REASONS[reason])
    assert "/login/" in page.url
    page.goto("/")  # and nobody is signed in
    expect(page.get_by_role("heading", name="Log in to Parley")).to_be_visible()


def test_a_first_sign_in_creates_an_account_and_later_ones_find_it(browser_page, op):
    page = browser_page
    sign_in(page, op, "ann")
    ann = get_user_model().objects.get(email="ann@acme.test")
    assert (ann.username, ann.first_name, ann.has_usable_password()) == ("ann", "Ann", False)
    identity = ProviderIdentity.objects.get(user=ann)
    assert (identity.issuer, identity.subject) == (op.issuer, "ann")
    # Signing out signs out at the provider too: the next sign-in asks for the form again.
    sign_out(page)
    page.wait_for_url(f"{op.issuer}/session/end**")
    page.locator("button[autofocus]").click()  # the provider's "Yes, sign me out"
    expect(page.get_by_role("heading", name="Log in to Parley")).to_be_visible()
    # The e-mail changes at the provider: the link, not the address, finds the account.
    op.add_account("ann", email="ann.new@acme.test", preferred_username="ann")
    sign_in(page, op, "ann")
    assert get_user_model().objects.filter(email__iendswith="acme.test").count() == 1
    identity.refresh_from_db()
    assert identity.email == "ann.new@acme.test" and identity.last_sign_in_at is not None


def test_an_existing_account_is_matched_by_verified_email_only(browser_page, op, make_user):
    page = browser_page
    bob = make_user("bob")
    bob.email = "Bob@Acme.test"
    bob.save()
    op.add_account("mallory", email="bob@acme.test", email_verified=False)
    start_sign_in(page, op, "mallory")
    expect_refused(page, "unverified")
    assert not ProviderIdentity.objects.exists()
    op.add_account("bob-at-acme", email="bob@acme.test")
    sign_in(page, op, "bob-at-acme")
    assert ProviderIdentity.objects.get(subject="bob-at-acme").user == bob
    assert get_user_model().objects.count() == 1


@pytest.mark.parametrize(
    ("rule", "value", "claims", "reason"),
    [
        ("PARLEY_OIDC_ALLOWED_DOMAINS", ["acme.test"], {"email": "eve@elsewhere.test"}, "domain"),
        ("PARLEY_OIDC_ALLOWED_GROUPS", ["staff"], {"email": "eve@acme.test", "groups": ["guests"]},
         "group"),
        ("PARLEY_OIDC_CREATE_USERS", False, {"email": "eve@acme.test"}, "no-account"),
    ],
)  # fmt: skip
def test_the_admins_rules_turn_people_away(browser_page, op, settings, rule, value, claims, reason):
    setattr(settings, rule, value)
    if rule == "PARLEY_OIDC_ALLOWED_GROUPS":
        settings.OIDC_RP_SCOPES = "openid email profile groups"
    op.add_account("eve", **claims)
    start_sign_in(browser_page, op, "eve")
    expect_refused(browser_page, reason)
    assert not get_user_model().objects.exists()
    if rule == "PARLEY_OIDC_CREATE_USERS":  # the admin made Ann's account beforehand
        get_user_model().objects.create_user("ann.admin.made", email="ann@acme.test")
    sign_in(browser_page, op, "ann")  # someone the rules let in still comes in


def test_a_callback_this_browser_did_not_start_is_refused(browser_session, asgi_server, op):
    """Login CSRF: an attacker signs in at the provider and sends a victim their callback
    link; the victim's browser never started that sign-in, so its state is refused."""
    attacker = browser_session.new_context(base_url=asgi_server.url)
    victim = browser_session.new_context(base_url=asgi_server.url)
    try:
        for context in (attacker, victim):
            context.route(OUTSIDE, lambda route: route.abort())
        page = attacker.new_page()
        op.hold = True  # the attacker keeps the callback, its code unused
        start_sign_in(page, op, "ann")
        for _ in range(300):
            if op.callbacks:
                break
            page.wait_for_timeout(50)
        caught = op.callbacks
        assert "code=" in caught[0] and "state=" in caught[0]
        victim_page = victim.new_page()
        victim_page.goto("/login/")  # the victim has a session of their own
        victim_page.goto(caught[0])
        expect_refused(victim_page, "state")
        # A state made up outright, in a browser that did start a sign-in, fares no better.
        forged = re.sub(r"state=[^&]+", "state=forged-by-someone", caught[0])
        page.goto(forged)
        expect_refused(page, "state")
        assert not get_user_model().objects.exists()
    finally:
        browser_session.close_context(attacker)
        browser_session.close_context(victim)


def test_an_expired_or_replayed_code_is_refused(browser_page, asgi_server, tmp_path, settings):
    page = browser_page
    short = Provider(parley_url=asgi_server.url, folder=tmp_path, code_ttl=1)
    try:
        settings.PARLEY_OIDC_ISSUER, settings.PARLEY_OIDC_NAME = short.issuer, "Acme"
        settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
        discovery.forget()
        short.add_account("ann", email="ann@acme.test")
        short.delay = 2.5  # the code lives 1 s
        start_sign_in(page, short, "ann")
        expect_refused(page, "expired")
        # A code that worked once does not work twice (a stolen callback URL replayed).
        short.delay = 0
        start_sign_in(page, short, "ann")
        expect(page.get_by_role("heading", name="Your sessions")).to_be_visible()
        sign_out(page)
        page.locator("button[autofocus]").click()
        expect(page.get_by_role("heading", name="Log in to Parley")).to_be_visible()
        page.goto(short.callbacks[-1])
        expect_refused(page, "state")  # its state went with its first use
    finally:
        short.stop()
        discovery.forget()


def test_an_id_token_for_another_client_is_refused(browser_page, op):
    """The provider issues a genuine, signed ID token carrying Parley's own nonce, but for
    another client (the front on the way asks in that client's name): its audience is wrong."""
    op.swap_client = True
    start_sign_in(browser_page, op, "ann")
    expect_refused(browser_page, "audience")
    assert not get_user_model().objects.exists()
    op.swap_client = False
    sign_in(browser_page, op, "ann")


def test_local_passwords_can_be_switched_off(browser_page, op, alice, settings):
    settings.PARLEY_LOCAL_LOGIN = False
    page = browser_page
    page.goto("/login/")
    expect(page.get_by_label("Password")).to_have_count(0)
    expect(page.get_by_role("link", name="Sign in with Acme")).to_be_visible()
    # A password posted anyway opens nothing, here or on the admin's page.
    client = Client()
    answer = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert answer.status_code == 403
    assert (
        client.post("/admin/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    )
    assert not client.login(username="alice", password=PASSWORD)
    assert client.get("/").status_code == 302  # still nobody
    settings.PARLEY_LOCAL_LOGIN = True
    log_in(page)  # with it back on, the same password works (the switch was what refused)
    sign_out(page)
    settings.PARLEY_LOCAL_LOGIN = False
    page.goto("/admin/")
    expect(page.get_by_role("heading", name="Log in to Parley")).to_be_visible()


def test_a_disabled_person_is_signed_out_of_every_tab_and_stream(browser_page, op, asgi_server):
    page = browser_page
    sign_in(page, op, "ann")
    ann = get_user_model().objects.get(email="ann@acme.test")
    session = session_create(owner=ann, name="Quarterly plan")
    page.goto(f"/t/{session.active_thread.public_id}/")
    expect(page.locator("#sync-state[data-synced=true]")).to_have_count(1)
    _, raw = token_create(user=ann, name="ann's terminal", scope="read")
    url = f"{asgi_server.url}/api/v1/threads/{session.active_thread.public_id}/events"
    with client_stream(url, raw) as (response, lines):
        assert response.status_code == 200
        assert next(events(lines, until=lambda k, d: True))[0] == "snapshot"
        ann.is_active = False
        disabled_at = time.monotonic()
        ann.save()  # as the admin's form does
        ended = [kind for kind, _, _ in events(lines, until=lambda k, d: k == "end")]
        assert ended[-1] == "end"
        stream_ended = time.monotonic() - disabled_at
    # The tab left the thread for the sign-in page at once, and cannot sign in again.
    expect(page.get_by_role("heading", name="Log in to Parley")).to_be_visible()
    on_sign_in_page = time.monotonic() - disabled_at
    print(f"account disabled: the API stream ended {stream_ended * 1000:.0f} ms later, the tab "
          f"was on the sign-in page {on_sign_in_page * 1000:.0f} ms later")  # fmt: skip
    sign_in_page = page.url
    assert "/login/" in sign_in_page
    start_sign_in(page, op, "ann")
    expect_refused(page, "disabled")
    assert httpx.get(url, headers={"Authorization": f"Bearer {raw}"}).status_code == 401


def test_the_provider_is_asked_again_and_can_end_a_session(browser_page, op, settings):
    settings.OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = 1
    page = browser_page
    sign_in(page, op, "ann")
    time.sleep(1.2)
    page.goto("/")  # a silent round trip to the provider, and back on the page
    expect(page.get_by_role("heading", name="Your sessions")).to_be_visible()
    op.add_account("ann", email="ann@acme.test", disabled=True)  # gone at the provider
    time.sleep(1.2)
    page.goto("/")
    expect_refused(page, "ended")
