"""The balancer recipe (deploy/nginx.conf, issue 49), run as it is with Debian's nginx in
front of two web processes and a worker: both processes serve; a tab's websocket follows a
reply through it, and through a web process's restart (closed with the reconnect code, back
through the other one); the API's live events arrive while the reply streams, not at its end;
a body over the recipe's limit is refused by nginx."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from apps.api.tokens import token_create
from apps.chat.models import Message, MessageStatus
from config.embedded_redis import free_port
from tests.chat.test_faults import WORDS, cookie_for, numbered_words_thread, reply_of
from tests.conftest import wait_until
from tests.topology import ROOT, Child, FollowedTab, post

pytestmark = pytest.mark.django_db(transaction=True)
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def recipe(port: int, upstreams: list[int], max_body: str) -> str:
    """deploy/nginx.conf with this test's ports (and a smaller body limit to try)."""
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    replaced = text.replace("server 127.0.0.1:8001;\n    server 127.0.0.1:8002;", "\n    ".join(
        f"server 127.0.0.1:{upstream};" for upstream in upstreams))  # fmt: skip
    replaced = replaced.replace("listen 80;", f"listen 127.0.0.1:{port};")
    replaced = replaced.replace("client_max_body_size 1024m;", f"client_max_body_size {max_body};")
    assert replaced.count(str(upstreams[0])) == 1 and f":{port};" in replaced
    return replaced


def start_nginx(folder: Path, upstreams: list[int], *, max_body: str = "1m") -> Child:
    folder.mkdir()
    folder.chmod(0o755)  # started as root, nginx's workers run as nobody
    port = free_port()
    temp = "\n".join(f"    {kind}_temp_path {folder}/{kind};"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))  # fmt: skip
    (folder / "nginx.conf").write_text(
        f"pid {folder}/nginx.pid;\nerror_log {folder}/error.log;\nevents {{}}\n"
        f"http {{\n    access_log {folder}/access.log;\n{temp}\n"
        f"{recipe(port, upstreams, max_body)}\n}}\n"
    )
    log = folder / "stderr.log"
    process = subprocess.Popen(
        [NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf"), "-g", "daemon off;"],
        stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    child = Child("nginx", process, log, port)
    wait_until(lambda: _answers(child.url + "/healthz"), timeout=15)
    return child


async def until(condition, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def numbered_thread(alice, roles, emulator):
    """Numbered words for about 25 s: long enough to restart a process under a loaded suite."""
    return numbered_words_thread(alice, emulator, tokens_per_second=20)


@pytest.fixture
def nginx_in_front(topology, tmp_path):
    if not os.path.exists(NGINX):
        pytest.fail("Debian's nginx is missing: `make test` installs it (apt-get install nginx).")
    worker = topology.start_worker("worker")
    webs = [topology.start_web("web-a"), topology.start_web("web-b")]
    topology.wait_worker_ready(worker)
    nginx = start_nginx(tmp_path / "nginx", [web.port for web in webs])
    yield nginx, webs
    nginx.process.send_signal(signal.SIGQUIT)
    nginx.process.wait(timeout=10)


def test_both_web_processes_serve_and_a_tab_follows_a_reply_through_a_restart(
    nginx_in_front, topology, alice, numbered_thread
):
    nginx, webs = nginx_in_front
    for _ in range(6):
        assert _answers(f"{nginx.url}/healthz")
    served = [web.output().count("GET /healthz") for web in webs]
    assert all(served), f"nginx sent every request to one process: {served}"

    cookie = cookie_for(alice)
    thread = numbered_thread
    tab = FollowedTab(nginx, str(thread.public_id), cookie)  # reconnects go to nginx again
    connected = f"WSCONNECT /ws/threads/{thread.public_id}/"

    async def scenario() -> None:
        await post(nginx, str(thread.public_id), cookie, "@assistant count for me")
        reply = await asyncio.to_thread(reply_of, thread)
        following = asyncio.ensure_future(
            tab.follow(lambda t: t.status(str(reply.public_id)) == "done")
        )
        await until(lambda: len(tab.seen_texts.get(str(reply.public_id), [])) > 3)
        # Restart the process that has the tab: it closes the socket with the reconnect
        # code, and the tab comes back through nginx, which sends it to the other one.
        holder = next(web for web in webs if connected in web.output())
        holder.process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(holder.process.wait, 30)
        await until(lambda: len([s for s in tab.sockets if "synced" in s]) == 2)
        assert Message.objects.get(pk=reply.pk).status == MessageStatus.STREAMING
        await asyncio.to_thread(topology.start_web, holder.name, holder.port)
        await asyncio.wait_for(following, 120)

    asyncio.run(scenario())
    reply = Message.objects.get(thread=thread, speaker="assistant")
    assert (reply.status, reply.text) == (MessageStatus.DONE, WORDS)
    shown = tab.seen_texts[str(reply.public_id)]
    assert all(WORDS.startswith(text) for text in shown) and shown[-1] == WORDS
    logs = topology.logs() + (nginx.log.parent / "error.log").read_text()
    assert 4012 in tab.closes and set(tab.closes) <= {4012}, (tab.closes, tab.sockets, logs)


def test_the_apis_live_events_arrive_while_the_reply_streams(
    nginx_in_front, alice, numbered_thread
):
    nginx, _ = nginx_in_front
    token = token_create(user=alice, name="through nginx", scope="post")[1]
    thread = numbered_thread
    headers = {"Authorization": f"Bearer {token}"}

    async def scenario() -> tuple[int, str]:
        async with aiohttp.ClientSession(headers=headers) as http:
            events = await http.get(f"{nginx.url}/api/v1/threads/{thread.public_id}/events")
            assert events.status == 200
            assert events.headers["Content-Type"].startswith("text/event-stream")
            posted = await http.post(f"{nginx.url}/api/v1/threads/{thread.public_id}/messages",
                                     json={"text": "@assistant count for me"})  # fmt: skip
            assert posted.status in (200, 201), await posted.text()

            def status_now() -> str:
                return Message.objects.get(thread=thread, speaker="assistant").status

            deltas = 0
            async for line in events.content:
                if line.startswith(b"event: delta"):
                    deltas += 1
                if deltas == 5:  # five pieces in: where is the reply meanwhile?
                    events.close()
                    return deltas, await asyncio.to_thread(status_now)
        return deltas, ""

    deltas, status = asyncio.run(scenario())
    # Unbuffered: the pieces came while the reply still streamed (25 s of it), not in a lump.
    assert (deltas, status) == (5, MessageStatus.STREAMING)


def test_a_body_over_the_recipes_limit_is_refused_by_nginx(nginx_in_front, alice):
    nginx, webs = nginx_in_front
    token = token_create(user=alice, name="big body", scope="post")[1]
    request = urllib.request.Request(
        f"{nginx.url}/api/v1/imports", data=b"x" * (2 * 1024 * 1024), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/octet-stream"},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 413
    assert not any("/api/v1/imports" in web.output() for web in webs)  # it never reached them
