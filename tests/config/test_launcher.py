"""`make run`'s launcher: a fresh var dir, no REDIS_URL, no DATABASE_URL → a working app."""

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from apps.chat.models import USER_SPEAKER
from config.embedded_redis import free_port
from tests.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]


def children_of(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def launcher_env(tmp_path, port: int) -> dict[str, str]:
    """A fresh install's environment: no Redis or database configured, a scratch var dir."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(PORT=str(port), PARLEY_VAR_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    return env


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def gone(pids) -> bool:
    """Wait up to 30 s for every one of `pids` to have exited."""
    deadline = time.monotonic() + scaled(30)
    while [pid for pid in pids if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    return not [pid for pid in pids if alive(pid)]


def shared_heap_mb(pid: int) -> float:
    """Memory of the process's heap (anonymous mappings, not files such as libraries, which
    any processes share) that it shares with others: what it got by fork and kept unwritten."""
    shared, anonymous = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            anonymous = len(fields) < 6 or fields[5] == "[heap]"
        elif anonymous and fields[0] in ("Shared_Clean:", "Shared_Dirty:"):
            shared += int(fields[1])
    return shared / 1024


class Launched:
    """`make run`'s launcher as a child of the test, with its log."""

    def __init__(self, tmp_path, *, background: bool = False, **env: str):
        self.port = free_port()
        self.log = tmp_path / "launcher.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.launcher"], cwd=ROOT,
            env={**launcher_env(tmp_path, self.port), **env},
            stdout=self.log.open("w"), stderr=subprocess.STDOUT,
            preexec_fn=ignore_sigint if background else None,
        )  # fmt: skip

    def wait_for(self, condition, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + scaled(timeout)
        while not condition():
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, f"{what}\n{self.log.read_text()}"
            time.sleep(0.3)

    def page(self) -> str | None:
        try:
            url = f"http://127.0.0.1:{self.port}/login/"
            with urllib.request.urlopen(url, timeout=10) as page:
                return page.read().decode() if page.status == 200 else None
        except OSError:
            return None

    def children(self, name: str = "") -> list[int]:
        return [pid for pid in children_of(self.process.pid) if name in cmdline(pid)]


@pytest.mark.slow
@pytest.mark.heavy
def test_started_in_the_background_it_serves_restarts_what_dies_and_ctrl_c_stops_it_all(
    tmp_path,
):
    """A fresh var dir, no REDIS_URL or DATABASE_URL: a working app. Started in the background
    (`make run &` from a script, nohup: the shell hands it SIGINT ignored), a worker or Redis
    that dies is said and started again, and `kill -INT` still stops every child in order —
    a second one while it stops does not break that off."""
    app = Launched(tmp_path, background=True, PARLEY_RECOVERY_INTERVAL_SECONDS="1")
    try:
        app.wait_for(lambda: app.page() is not None, "Parley did not start")
        assert "Log in to Parley" in (app.page() or "")
        output = app.log.read_text()
        assert "Created a local login: parley / " in output
        assert f"Parley is running at http://127.0.0.1:{app.port}/" in output
        assert (tmp_path / "local-secrets.json").exists()
        workers = set(app.children("celery"))
        assert len(workers) == min(os.cpu_count() or 1, 2)  # one per core, up to two
        # Forked from the launcher, which loaded Django, the SDKs and the templates: each
        # child shares that heap with it (started as programs of their own, they share ~0).
        webs = app.children("config.web")
        assert len(webs) == len(workers)
        assert all(shared_heap_mb(pid) > 20 for pid in [*webs, *workers])
        worker = min(workers)
        os.kill(worker, signal.SIGKILL)
        app.wait_for(
            lambda: re.search(r"The worker( \d+)? stopped unexpectedly", app.log.read_text()),
            "no notice",
        )
        app.wait_for(lambda: len(set(app.children("celery")) - {worker}) == len(workers),
                     "the worker was not restarted")  # fmt: skip
        (redis,) = app.children("redis-server")
        os.kill(redis, signal.SIGKILL)
        app.wait_for(lambda: "embedded Redis stopped unexpectedly" in app.log.read_text(),
                     "no notice")  # fmt: skip
        app.wait_for(lambda: app.children("redis-server") not in ([], [redis]),
                     "Redis was not restarted")  # fmt: skip
        app.wait_for(lambda: app.page() is not None, "no pages after Redis came back")
        children = app.children()
        assert len(children) >= 4  # redis-server, the celery workers, daphne
    finally:
        # (Celery logs the lost broker connection with its traceback; the stop must not.)
        stopping_from = len(app.log.read_text())
        app.process.send_signal(signal.SIGINT)
        time.sleep(0.5)  # while the launcher is stopping its children
        app.process.send_signal(signal.SIGINT)
        try:
            app.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            app.process.kill()  # its children follow it (PR_SET_PDEATHSIG)
            raise
    output = app.log.read_text()
    assert app.process.returncode == 0, output
    assert "Traceback" not in output[stopping_from:]
    assert gone(children)


def test_a_port_in_use_is_a_clear_error_before_anything_starts(tmp_path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "config.launcher"], cwd=ROOT,
            env=launcher_env(tmp_path, port), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    assert f"Could not listen on 127.0.0.1:{port}: Address already in use" in done.stdout
    assert not (tmp_path / "parley.sqlite3").exists()  # nothing was set up


def test_a_worker_on_its_own_without_redis_url_says_so_and_starts_nothing(tmp_path):
    """`python -m config.worker` (the Procfile's worker) joins the web processes' Redis: with
    none configured it cannot guess it, and says so instead of embedding one of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "config.worker"], cwd=ROOT,
        env=launcher_env(tmp_path, free_port()), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Set REDIS_URL" in done.stdout
    assert not (tmp_path / "parley.sqlite3").exists()


def cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
@pytest.mark.heavy
def test_every_web_process_serves_the_port_and_a_killed_launcher_takes_them_with_it(tmp_path):
    """WEB_PROCESSES web servers share the port: the kernel spreads new connections over
    them, so each one serves a share of a burst of page loads. The launcher killed outright,
    its children get SIGTERM from the kernel (PR_SET_PDEATHSIG) and stop."""
    app = Launched(tmp_path, WEB_PROCESSES="3", WORKER_PROCESSES="1")

    def load_pages(count: int) -> None:
        for _ in range(count):  # a new connection each: hashed over the processes' sockets
            with urllib.request.urlopen(f"http://127.0.0.1:{app.port}/login/", timeout=10) as page:
                assert page.status == 200

    try:
        app.wait_for(lambda: app.page() is not None, "Parley did not start")
        webs, workers = app.children("config.web"), app.children("celery")
        assert (len(webs), len(workers)) == (3, 1)
        before = {pid: cpu_ms(pid) for pid in webs}
        load_pages(90)
        busy = {pid: cpu_ms(pid) - before[pid] for pid in webs}
        # ~30 page loads each; an idle daphne spends ~1 ms a second.
        assert all(spent >= 30 for spent in busy.values()), busy
        children = app.children()
    finally:
        app.process.send_signal(signal.SIGKILL)
        app.process.wait(60)
    assert gone(children)


def suite_database_url(name: str) -> str | None:
    """A fresh database `name` of the suite's own kind: None on SQLite (the launcher makes its
    own file), a new PostgreSQL database in the PostgreSQL pass."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if "postgresql" not in database["ENGINE"]:
        return None
    import psycopg

    server = {k: database[k] for k in ("HOST", "PORT", "USER") if database.get(k)}
    admin = psycopg.connect(
        dbname="postgres", host=server.get("HOST"), port=server.get("PORT"),
        user=server.get("USER"), password=database.get("PASSWORD") or None, autocommit=True,
    )  # fmt: skip
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    user = server.get("USER", "postgres")
    return f"postgres://{user}@{server.get('HOST', '127.0.0.1')}:{server.get('PORT', 5432)}/{name}"


class Browser:
    """A person's cookies and CSRF token, over plain HTTP."""

    CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')

    def __init__(self, base: str) -> None:
        import http.cookiejar

        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def get(self, path: str) -> tuple[str, str]:
        with self.opener.open(self.base + path, timeout=30) as page:
            return page.geturl(), page.read().decode()

    def post(self, path: str, data: dict[str, str], token_from: str) -> tuple[str, str]:
        token = self.CSRF.search(self.get(token_from)[1])
        assert token, f"no CSRF token on {token_from}"
        body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": token[1]}).encode()
        request = urllib.request.Request(
            self.base + path, data=body, headers={"Referer": self.base + token_from}
        )
        with self.opener.open(request, timeout=30) as page:
            return page.geturl(), page.read().decode()


@pytest.mark.slow
@pytest.mark.heavy
def test_it_starts_on_the_suites_database_and_a_message_posted_through_it_is_answered(tmp_path):
    """`make run` as deployed: on PostgreSQL in the suite's PostgreSQL pass (whose pool must
    open after the fork: its threads cannot be forked), on SQLite otherwise. A person logs
    in, starts a session, posts a message, and the demo provider's reply arrives."""
    import uuid

    name = f"parley_launcher_{os.getpid()}"
    database = suite_database_url(name)
    app = Launched(tmp_path, **({"DATABASE_URL": database} if database else {}))
    try:
        app.wait_for(lambda: app.page() is not None, "Parley did not start", timeout=180)
        login = re.search(r"local login: (\S+) / (\S+)", app.log.read_text())
        assert login, app.log.read_text()
        person = Browser(f"http://127.0.0.1:{app.port}")
        person.post("/login/", {"username": login[1], "password": login[2]}, token_from="/login/")
        thread_url, _ = person.post("/sessions/new/", {"name": "Launcher"}, token_from="/")
        assert "/t/" in thread_url, thread_url
        thread = thread_url.rstrip("/").rsplit("/", 1)[-1]
        text = f"Hello from the launcher test {uuid.uuid4().hex[:8]}"
        person.post(f"/t/{thread}/messages/", {"text": text, "client_token": str(uuid.uuid4())},
                    token_from=f"/t/{thread}/")  # fmt: skip

        def answered() -> bool:
            page = person.get(f"/t/{thread}/")[1]
            replies = re.findall(r'data-status="done" data-speaker="([^"]+)"', page)
            return text in page and any(speaker != USER_SPEAKER for speaker in replies)

        app.wait_for(answered, "the demo provider's reply did not arrive", timeout=120)
        # A token put in a query string is refused, and never reaches the access log.
        secrets = [f"QS-SECRET-{n}-{uuid.uuid4().hex}" for n in range(3)]
        query = f"token={secrets[0]}&access_token={secrets[1]}&api_key={secrets[2]}"
        try:
            person.get(f"/api/v1/sessions?{query}")
        except urllib.error.HTTPError as refused:
            assert refused.code == 401
        app.wait_for(lambda: "/api/v1/sessions?token=[redacted]" in app.log.read_text(),
                     "the refused request's access line", timeout=30)  # fmt: skip
        log = app.log.read_text()
        assert not [secret for secret in secrets if secret in log]
        assert "Traceback" not in log
    finally:
        app.process.send_signal(signal.SIGINT)
        try:
            app.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            app.process.kill()
        if database:
            import psycopg

            with psycopg.connect(database.rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
