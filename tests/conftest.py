"""Shared fixtures: the three users, a real Celery worker, a live daphne server, Chromium."""

from __future__ import annotations

import asyncio
import faulthandler
import itertools
import os
import threading
import time

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model

from apps.chat.records.sessions import session_create, session_set_provider
from apps.roles.models import Role
from apps.roles.services import role_pack_load
from tests.deadlines import scaled

# Real MCP servers (stdio and streamable HTTP) for the connector, chat and browser tests.
pytest_plugins = ["tests.connectors.fixtures", "tests.object_storage"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Browser tests last (in one process, the rest never meets Playwright's loop); in a
    parallel run, the slow tests spread over the processes' first places."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1:
        items[:] = slow_first_in_each_share(items, workers)


def slow_first_in_each_share(items: list, workers: int) -> list:
    """pytest-xdist's worksteal hands process k the k-th of `workers` contiguous shares of
    the list (sized as it sizes them) and lets idle ones take from busy ones' ends. Put the
    slow tests at the front of the shares in turn, so they all start at once, one per process,
    instead of one after another where the list happened to put them. The heavy ones (whole
    launchers, rolling restarts, hundreds of streams: each loads the machine on its own) all go
    to the first share, so they run one after another, never starving each other; the other
    processes take the rest of that share from its end."""

    def kind(item) -> str:
        return next((m for m in ("heavy", "slow") if item.get_closest_marker(m)), "rest")

    heavy = [item for item in items if kind(item) == "heavy"]
    slow = [item for item in items if kind(item) == "slow"]
    rest = iter([item for item in items if kind(item) == "rest"])
    ordered: list = []
    left = len(items)
    for share in range(workers):
        size = left // (workers - share)
        left -= size
        mine = heavy if share == 0 else slow[share - 1 :: workers - 1]
        ordered += mine + list(itertools.islice(rest, max(size - len(mine), 0)))
    return ordered + list(rest)


SHIPPED_DATA = (  # the data migrations' loaders, in their order
    ("apps.roles.migrations.0002_default_assistant", "create_assistant"),
    ("apps.roles.migrations.0004_default_role_pack", "load_default_pack"),
    ("apps.roles.migrations.0006_shipped_output_rules", "fill_output_rules"),
    ("apps.providers.migrations.0003_shipped_prices", "ship"),
)


_loop_marks: dict[str, asyncio.AbstractEventLoop] = {}


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    """Between its calls, Playwright's sync API marks its own loop as the main thread's running
    loop (its wait_for_future). A parallel worker runs the browser files it is given between
    other files, whose asyncio.run and async_to_sync would then refuse to start, and whose
    database connection would differ from one fixture to the next (Django keeps one per async
    context while a loop runs). Take the mark off before any fixture of a test that is not a
    browser test, and put it back after its last (see the teardown below)."""
    left = asyncio._get_running_loop()
    if left is not None and item.get_closest_marker("browser") is None:
        _loop_marks[item.nodeid] = left
        asyncio._set_running_loop(None)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A transactional test ends with a flush that takes what the data migrations loaded (the
    film crew, the shipped prices). Run alone, the suite puts those tests after the others; a
    parallel worker runs whole files in the order it gets them, so load the data again."""
    yield
    try:
        if nextitem is not None and _flushes_the_database(item):  # None: the database is gone
            _load_shipped_data(item.config)
    finally:
        left = _loop_marks.pop(item.nodeid, None)
        if left is not None:
            asyncio._set_running_loop(left)


def _flushes_the_database(item) -> bool:
    marker = item.get_closest_marker("django_db")
    return bool(marker is not None and marker.kwargs.get("transaction")) or (
        "transactional_db" in getattr(item, "fixturenames", ())
    )


def _load_shipped_data(config) -> None:
    import importlib

    from django.apps import apps as django_apps
    from pytest_django.plugin import blocking_manager_key

    with config.stash[blocking_manager_key].unblock():
        for module, loader in SHIPPED_DATA:
            getattr(importlib.import_module(module), loader)(django_apps, None)


@pytest.fixture(autouse=True)
def workspace_root(settings, tmp_path):
    """Every test's session workspaces and attachments live in its own temporary folder."""
    settings.PARLEY_WORKSPACE_ROOT = str(tmp_path / "workspaces")
    workspace = settings.STORAGES["workspace"]
    settings.STORAGES = {
        **settings.STORAGES,
        "workspace": {**workspace, "OPTIONS": {**workspace.get("OPTIONS", {}),
                                               "location": str(tmp_path / "workspaces")}},
    }  # fmt: skip
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "workspaces"


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


FILM_CREW = [
    "assistant",
    "director",
    "editorial_architect",
    "visual_architect",
    "sound_designer",
    "actor_agent",
]


@pytest.fixture
def roles(db):
    """The default pack (the film crew); transactional tests flush what the migration loaded."""
    role_pack_load("film-crew")
    return list(Role.objects.filter(handle__in=FILM_CREW).order_by("sort_order"))


@pytest.fixture
def alice_session(alice, roles):
    return session_create(owner=alice, name="Alice's session")


@pytest.fixture
def alice_thread(alice_session):
    return alice_session.active_thread


@pytest.fixture
def fast_demo(settings):
    """A demo provider quick enough for tests but still streaming in many deltas."""
    settings.PARLEY_DEMO_FIRST_TOKEN_MS = 50
    settings.PARLEY_DEMO_TOKENS_PER_SECOND = 400
    settings.PARLEY_FLUSH_INTERVAL_MS = settings.PARLEY_FLUSH_MIN_MS = 20  # batched: a
    # push per token at 400 tokens/s, in every test at once, loads the suite for nothing
    settings.PARLEY_CHECKPOINT_INTERVAL_MS = 200
    return settings


@pytest.fixture
def slow_demo(settings):
    """A demo provider slow enough to join, leave and reload while it streams."""
    settings.PARLEY_DEMO_FIRST_TOKEN_MS = 100
    settings.PARLEY_DEMO_TOKENS_PER_SECOND = 60
    settings.PARLEY_FLUSH_INTERVAL_MS = settings.PARLEY_FLUSH_MIN_MS = 40
    settings.PARLEY_CHECKPOINT_INTERVAL_MS = 300
    return settings


@pytest.fixture(scope="session", autouse=True)
def close_stray_connections(django_db_setup, django_db_blocker):
    """Set up first, torn down last: after the worker and the web server have stopped, close
    what their threads left open, so the test database can be dropped (PostgreSQL refuses to
    drop a database that still has sessions)."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(scope="session", autouse=True)
def quick_password_hashes():
    """Django's password hash is slow on purpose (a quarter of a second here, double that
    under the suite's load), and most tests make a user or log one in: the suite hashes
    with MD5. Nothing here tests the hash's strength; production keeps Django's default."""
    from django.test import override_settings

    hashers = ["django.contrib.auth.hashers.MD5PasswordHasher", *django_settings.PASSWORD_HASHERS]
    with override_settings(PASSWORD_HASHERS=hashers):
        yield


@pytest.fixture(scope="session", autouse=True)
def quick_flushes():
    """A transactional test ends with a flush, which by default then fires post_migrate to
    write every app's content types and permissions again (two thirds of the flush's time on
    PostgreSQL, over 200 tests). Nothing here reads permissions (superusers only), content
    types are made again when asked for, and the data migrations' rows are loaded again after
    each flush (pytest_runtest_teardown): flush without the signal, and forget the cached
    content types whose rows the flush took."""
    from django.contrib.contenttypes.models import ContentType
    from django.core.management import call_command
    from django.test import TransactionTestCase

    def flush(case):
        for database in case._databases_names(include_mirrors=False):
            call_command(
                "flush", verbosity=0, interactive=False, database=database,
                reset_sequences=False, inhibit_post_migrate=True,
            )  # fmt: skip
        ContentType.objects.clear_cache()

    original = TransactionTestCase._fixture_teardown
    TransactionTestCase._fixture_teardown = flush
    yield
    TransactionTestCase._fixture_teardown = original


@pytest.fixture(scope="session")
def celery_worker_session(django_db_setup, django_db_blocker):
    """A real Celery worker (threads pool, as in production) consuming from the real broker."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    app.conf.task_default_queue = django_settings.CELERY_TASK_DEFAULT_QUEUE
    worker_context = start_worker(
        app,
        pool="threads",
        concurrency=256,  # as in production: each task only waits on the worker's event loop
        perform_ping_check=False,
        shutdown_timeout=20,
        queues=[django_settings.CELERY_TASK_DEFAULT_QUEUE],
    )
    with django_db_blocker.unblock():  # the worker looks for unfinished replies as it starts
        worker = worker_context.__enter__()
    try:
        yield worker
    finally:
        worker_context.__exit__(None, None, None)


@pytest.fixture
def celery_worker(celery_worker_session, transactional_db):
    """Tests that enqueue work need committed rows, so they run as transactional tests.

    Afterwards every reply still in flight is interrupted and awaited, so no test's stream
    runs on into the next test's database.
    """
    yield celery_worker_session
    from apps.chat.council.replies import thread_interrupt
    from apps.chat.models import IN_FLIGHT, Thread

    for thread in Thread.objects.filter(messages__status__in=IN_FLIGHT).distinct():
        thread_interrupt(thread=thread)
    # A task goes on after settling its message (the final push, the next stage of the turn):
    # wait for the worker to be idle too, or the next test's flush would race its queries.
    wait_worker_idle(timeout=15)
    quiet_before_the_flush()


def _forget_counts(streams) -> bool:
    """Drop the hub's counts still to read; True while a read of them is under way."""
    streams.counts_due.clear()
    return streams._counting


def wait_worker_idle(timeout: float = 15, *, settled: bool = True) -> None:
    """Wait until every task sent has reached the in-process worker and it has finished
    them all (with `settled`, no reply in flight either): whatever a test's turn would still
    do has been done — the event to wait for before checking that something did *not*
    happen."""
    from celery.worker import state as worker_state

    from apps.chat.models import IN_FLIGHT, Message

    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 3:  # idle on three looks in a row: a settle's follow-up task has been sent
        busy = (
            (settled and Message.objects.filter(status__in=IN_FLIGHT).exists())
            or worker_state.active_requests
            or worker_state.reserved_requests
        )
        quiet = 0 if busy else quiet + 1
        if busy and time.monotonic() > deadline:
            faulthandler.dump_traceback(all_threads=True)  # show where a stuck reply waits
            raise RuntimeError(f"The worker was still busy after {timeout} s.")
        time.sleep(0.05)


def quiet_before_the_flush(timeout: float = 15) -> None:
    """After a test's worker has gone idle: the counts settled replies changed are read on a
    later tick, and the announcer may still be rendering — reads that would race the flush
    ending the test (a deadlock with PostgreSQL's TRUNCATE). Nobody is left to show the counts
    to: drop them, let a read under way finish, and let the announcer drain."""
    from apps.chat.display import events
    from apps.chat.live import hub

    deadline = time.monotonic() + timeout
    streams = hub._hub
    while streams is not None and _forget_counts(streams):
        if time.monotonic() > deadline:
            raise RuntimeError(f"The hub was still reading counts after {timeout} s.")
        time.sleep(0.02)
    if events._announcer is not None:
        events._announcer.drain(timeout)


class LiveServer:
    def __init__(self, port: int):
        self.port = port
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

    from tests.chromium import TestChromium

    with sync_playwright() as playwright:
        chromium = TestChromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser_session, asgi_server):
    from playwright.sync_api import expect

    context = browser_session.new_context(base_url=asgi_server.url)
    # Playwright's own waits, as the suite's: longer when the machine is busy.
    expect.set_options(timeout=scaled(5_000))
    context.set_default_timeout(scaled(30_000))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    browser_session.close_context(context)
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


def wait_until(condition, *, timeout: float = 15.0, interval: float = 0.05, message: str = ""):
    """Poll `condition` until it returns something truthy; fail loudly after `timeout` (on a
    quiet machine: longer on a busy one, see tests/deadlines.py)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message or f"Condition not met within {timeout} s")
        time.sleep(interval)


def wait_settled(messages, *, timeout: float = 20.0):
    """Wait until every message has left queued/streaming; return them refreshed."""
    from apps.chat.models import IN_FLIGHT, Message

    ids = [message.pk for message in messages]
    wait_until(
        lambda: not Message.objects.filter(pk__in=ids, status__in=IN_FLIGHT).exists(),
        timeout=timeout,
        message=f"Replies still in flight after {timeout} s",
    )
    return list(Message.objects.filter(pk__in=ids).order_by("seq"))


@pytest.fixture
def emulated_anthropic(alice, emulator):
    """An Anthropic credential of alice's that talks to the loopback emulator."""
    from apps.providers.services import credential_save

    return credential_save(
        owner=alice, name="Emulated Anthropic", provider="anthropic",
        base_url=emulator.url, api_key="sk-ant-test-key-0000",
    )  # fmt: skip


@pytest.fixture
def anthropic_thread(alice_thread, emulated_anthropic):
    session_set_provider(
        session=alice_thread.session, credential=emulated_anthropic, model="claude-sonnet-5"
    )
    return alice_thread


@pytest.fixture
def topology(tmp_path):
    """Parley as deployed, in separate processes (tests/topology.py), stopped afterwards."""
    from tests.topology import Topology

    topology = Topology(tmp_path)
    yield topology
    topology.stop()
