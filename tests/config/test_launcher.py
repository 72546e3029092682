"""`make run`'s launcher: a fresh var dir, no REDIS_URL, no DATABASE_URL → a working app."""

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from config.embedded_redis import free_port

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


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stop", "background"),
    # (A single Ctrl-C is the first half of "twice", and what the background case sends.)
    [([signal.SIGINT, signal.SIGINT], False), ([signal.SIGKILL], False), ([signal.SIGINT], True)],
    ids=["ctrl-c-twice", "killed", "interrupted-in-background"],
)  # fmt: skip
def test_the_launcher_serves_the_app_and_stopping_it_stops_every_child(tmp_path, stop, background):
    """Ctrl-C stops the children in order (a second Ctrl-C does not break that off); if the
    launcher is killed outright, they get SIGTERM from the kernel (PR_SET_PDEATHSIG). Started
    in the background (`make run &` from a script, nohup), the shell hands it SIGINT ignored:
    `kill -INT` still stops it."""
    port = free_port()
    env = launcher_env(tmp_path, port)
    env["PARLEY_RECOVERY_INTERVAL_SECONDS"] = "1"  # the worker's periodic look runs, and stops
    log = (tmp_path / "launcher.log").open("w+")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "config.launcher"], cwd=ROOT, env=env, stdout=log, stderr=log,
        preexec_fn=ignore_sigint if background else None,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while True:
            assert launcher.poll() is None, (tmp_path / "launcher.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2) as page:
                    assert page.status == 200
                    assert "Log in to Parley" in page.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "launcher.log").read_text()
                time.sleep(0.5)
        output = (tmp_path / "launcher.log").read_text()
        assert "Created a local login: parley / " in output
        assert f"Parley is running at http://127.0.0.1:{port}/" in output
        assert (tmp_path / "local-secrets.json").exists()
        children = children_of(launcher.pid)
        assert len(children) >= 3  # redis-server, celery worker, daphne
    finally:
        for number, signum in enumerate(stop):
            if number:
                time.sleep(0.5)  # while the launcher is stopping its children
            launcher.send_signal(signum)
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            launcher.kill()  # its children follow it (PR_SET_PDEATHSIG)
            raise
    if stop[0] == signal.SIGINT:
        output = (tmp_path / "launcher.log").read_text()
        assert launcher.returncode == 0, output
        assert "Traceback" not in output
    deadline = time.monotonic() + 30
    while [pid for pid in children if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in children if alive(pid)]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.slow
def test_the_launcher_restarts_a_child_that_dies_and_says_so(tmp_path):
    port = free_port()
    env = launcher_env(tmp_path, port)
    log_path = tmp_path / "launcher.log"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "config.launcher"], cwd=ROOT, env=env,
        stdout=log_path.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip

    def wait_for(condition, what: str, timeout: float = 90):
        deadline = time.monotonic() + timeout
        while not condition():
            assert launcher.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, f"{what}\n{log_path.read_text()}"
            time.sleep(0.3)

    def serving() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2) as page:
                return page.status == 200
        except OSError:
            return False

    def children(name: str) -> list[int]:
        return [pid for pid in children_of(launcher.pid) if name in cmdline(pid)]

    def child(name: str) -> int | None:
        return next(iter(children(name)), None)

    try:
        wait_for(serving, "Parley did not start")
        workers = set(children("celery"))
        assert len(workers) == min(os.cpu_count() or 1, 2)  # one per core, up to two
        worker = min(workers)
        os.kill(worker, signal.SIGKILL)
        wait_for(
            lambda: re.search(r"The worker( \d+)? stopped unexpectedly", log_path.read_text()),
            "no notice",
        )
        wait_for(
            lambda: len(set(children("celery")) - {worker}) == len(workers),
            "the worker was not restarted",
        )
        redis = child("redis-server")
        assert redis is not None
        os.kill(redis, signal.SIGKILL)
        wait_for(lambda: "embedded Redis stopped unexpectedly" in log_path.read_text(), "no notice")
        wait_for(lambda: child("redis-server") not in (None, redis), "Redis was not restarted")
        wait_for(serving, "Parley stopped serving after Redis came back")
    finally:
        launcher.send_signal(signal.SIGINT)
        launcher.wait(timeout=60)


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


def cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
def test_every_web_process_serves_the_port(tmp_path):
    """WEB_PROCESSES web servers share the port: the kernel spreads new connections over
    them, so each one serves a share of a burst of page loads."""
    port = free_port()
    env = {**launcher_env(tmp_path, port), "WEB_PROCESSES": "3", "WORKER_PROCESSES": "1"}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "config.launcher"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip

    def load_pages(count: int) -> None:
        for _ in range(count):  # a new connection each: hashed over the processes' sockets
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=10) as page:
                assert page.status == 200

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                load_pages(1)
                break
            except OSError:
                assert time.monotonic() < deadline, "Parley did not start"
                time.sleep(0.3)
        webs = [pid for pid in children_of(launcher.pid) if "config.web" in cmdline(pid)]
        workers = [pid for pid in children_of(launcher.pid) if "celery" in cmdline(pid)]
        assert (len(webs), len(workers)) == (3, 1)
        before = {pid: cpu_ms(pid) for pid in webs}
        load_pages(90)
        busy = {pid: cpu_ms(pid) - before[pid] for pid in webs}
        # ~30 page loads each; an idle daphne spends ~1 ms a second.
        assert all(spent >= 30 for spent in busy.values()), busy
    finally:
        launcher.send_signal(signal.SIGINT)
        launcher.wait(60)
