"""Shared fixtures: the three users, a real Celery worker, a live daphne server, Chromium."""

from __future__ import annotations

import faulthandler
import threading
import time

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model

from apps.chat import services as chat_services
from apps.roles.services import role_ensure_default


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Browser tests last: Playwright's sync API leaves an event loop in the main thread."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.fixture
def make_user(db):
    def make(username: str, password: str = "correct-horse-battery"):  # browser tests log in
        return get_user_model().objects.create_user(username=username, password=password)

    return make


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def bob(make_user):
    return make_user("bob")


@pytest.fixture
def charlie(make_user):
    return make_user("charlie")


@pytest.fixture
def roles(db):
    """The default roles; transactional tests flush the table the migration filled."""
    return [role_ensure_default()]


@pytest.fixture
def alice_session(alice, roles):
    return chat_services.session_create(owner=alice, name="Alice's session")


@pytest.fixture
def alice_thread(alice_session):
    return alice_session.active_thread


@pytest.fixture
def fast_demo(settings):
    """A demo provider quick enough for tests but still streaming in many deltas."""
    settings.PARLEY_DEMO_FIRST_TOKEN_MS = 50
    settings.PARLEY_DEMO_TOKENS_PER_SECOND = 400
    settings.PARLEY_FLUSH_INTERVAL_MS = 20
    settings.PARLEY_CHECKPOINT_INTERVAL_MS = 200
    return settings


@pytest.fixture
def slow_demo(settings):
    """A demo provider slow enough to join, leave and reload while it streams."""
    settings.PARLEY_DEMO_FIRST_TOKEN_MS = 100
    settings.PARLEY_DEMO_TOKENS_PER_SECOND = 60
    settings.PARLEY_FLUSH_INTERVAL_MS = 40
    settings.PARLEY_CHECKPOINT_INTERVAL_MS = 300
    return settings


@pytest.fixture(scope="session")
def celery_worker_session(django_db_setup, django_db_blocker):
    """A real Celery worker (threads pool, as in production) consuming from the real broker."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    app.conf.task_default_queue = django_settings.CELERY_TASK_DEFAULT_QUEUE
    with start_worker(
        app,
        pool="threads",
        concurrency=8,
        perform_ping_check=False,
        shutdown_timeout=20,
        queues=[django_settings.CELERY_TASK_DEFAULT_QUEUE],
    ) as worker:
        yield worker


@pytest.fixture
def celery_worker(celery_worker_session, transactional_db):
    """Tests that enqueue work need committed rows, so they run as transactional tests.

    Afterwards every reply still in flight is interrupted and awaited, so no test's stream
    runs on into the next test's database.
    """
    yield celery_worker_session
    from apps.chat.models import IN_FLIGHT, Message, Thread
    from apps.chat.services import thread_interrupt

    for thread in Thread.objects.filter(messages__status__in=IN_FLIGHT).distinct():
        thread_interrupt(thread=thread)
    deadline = time.monotonic() + 15
    while Message.objects.filter(status__in=IN_FLIGHT).exists():
        if time.monotonic() > deadline:
            faulthandler.dump_traceback(all_threads=True)  # show where a stuck reply waits
            raise RuntimeError("Replies were still streaming 15 s after the test ended.")
        time.sleep(0.05)


class LiveServer:
    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def asgi_server_session(django_db_setup):
    """The real ASGI application served by daphne in a background thread."""
    from daphne.server import Server
    from twisted.internet import reactor

    from config.asgi import application
    from config.embedded_redis import free_port

    port = free_port()
    server = Server(
        application=application,
        endpoints=[f"tcp:port={port}:interface=127.0.0.1"],
        signal_handlers=False,
        verbosity=0,
    )
    thread = threading.Thread(target=server.run, name="daphne", daemon=True)
    thread.start()
    import socket

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        raise RuntimeError("daphne did not start")
    yield LiveServer(port)
    reactor.callFromThread(reactor.stop)
    thread.join(timeout=10)


@pytest.fixture
def asgi_server(asgi_server_session, celery_worker):
    return asgi_server_session


@pytest.fixture(scope="session")
def browser_session():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser_session, asgi_server):
    context = browser_session.new_context(base_url=asgi_server.url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture(scope="session")
def emulator_session():
    from apps.providers.emulator import Emulator

    emulator = Emulator(min_cache_tokens=200).start_in_thread()
    yield emulator
    emulator.stop()


@pytest.fixture
def emulator(emulator_session):
    """The loopback provider emulator, with an empty script queue and record."""
    emulator_session.reset()
    return emulator_session
