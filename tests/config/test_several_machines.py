"""Parley on several machines (issue 49): two web processes and two workers, each with a disk of
its own (its own var/, media and workspace folders), sharing only PostgreSQL or SQLite, Redis
and a bucket of S3-compatible object storage (moto's server). A photo uploaded through one web
process reaches the model from a worker, the other web process serves it and a PDF's first
page; a workspace file written through one is read through the other; an export sent in pieces
to both web processes is read and imported by a worker; and a rolling restart of all four
processes loses no word of the replies streaming meanwhile. Nothing lands on any disk."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
import urllib.request

import aiohttp
import pytest

from apps.api.tokens import token_create
from apps.chat.models import Message, MessageStatus, Session
from apps.imports.models import import_storage
from apps.ops.storage import files_under
from apps.providers.emulator import Script
from tests.attachments.test_sniff import image_bytes, text_pdf
from tests.chat.test_faults import cookie_for, off_the_loop
from tests.chat.test_rolling_restart import numbered_threads, stop_and_time
from tests.conftest import wait_until
from tests.imports.exports import chatgpt_trip
from tests.object_storage import BUCKET, KEYS
from tests.topology import CSRF, Child, FollowedTab, post

pytestmark = pytest.mark.django_db(transaction=True)
STREAMS = 4
RATE = 15
WORDS = "".join(f"w{n} " for n in range(1, 25 * RATE + 1)).rstrip()  # 25 s of words


def machine(tmp_path, name: str, endpoint: str) -> dict[str, str]:
    """A process's environment: its own disk, and the shared bucket."""
    var = tmp_path / name
    return {
        "PARLEY_VAR_DIR": str(var), "PARLEY_MEDIA_ROOT": str(var / "media"),
        "PARLEY_WORKSPACE_ROOT": str(var / "workspaces"),
        "PROMETHEUS_MULTIPROC_DIR": str(var / "metrics"),
        "PARLEY_STORAGE": "s3", "PARLEY_S3_ENDPOINT_URL": endpoint, "PARLEY_S3_BUCKET": BUCKET,
        **KEYS,
    }  # fmt: skip


async def _form_post(web: Child, page: str, path: str, cookie: str, data) -> str:
    """A form's POST from `page` (its CSRF token), as a browser sends it; the answer."""
    async with aiohttp.ClientSession(headers={"Cookie": cookie}) as http:
        async with http.get(f"{web.url}{page}") as shown:
            token = CSRF.search(await shown.text())[1]
            csrf_cookie = shown.cookies["csrftoken"].value
        data.add_field("csrfmiddlewaretoken", token)
        headers = {"Cookie": f"{cookie}; csrftoken={csrf_cookie}", "HX-Request": "true",
                   "Referer": web.url}  # fmt: skip
        async with http.post(f"{web.url}{path}", data=data, headers=headers) as answer:
            text = await answer.text()
            assert answer.status == 200, text[:500]
            return text


def upload_attachments(web: Child, thread, cookie: str, files: dict[str, bytes]) -> list[str]:
    form = aiohttp.FormData()
    for name, data in files.items():
        form.add_field("files", data, filename=name)
    page = f"/t/{thread.public_id}/"
    chips = asyncio.run(_form_post(web, page, f"{page}attachments/", cookie, form))
    return re.findall(r'data-attachment="([0-9a-f-]+)"', chips)


def fetch(web: Child, path: str, cookie: str = "", token: str = "", body=None) -> bytes:
    headers = {"Cookie": cookie} if cookie else {"Authorization": f"Bearer {token}"}
    if body is not None:
        headers["Content-Type"] = (
            "application/json" if isinstance(body, dict) else "application/octet-stream"
        )
        body = json.dumps(body).encode() if isinstance(body, dict) else body
    request = urllib.request.Request(web.url + path, data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


@pytest.mark.slow
@pytest.mark.heavy
def test_four_machines_share_only_the_database_redis_and_the_bucket(
    on_s3, topology, tmp_path, alice, emulator, anthropic_thread
):
    names = ("worker-a", "worker-b", "web-a", "web-b")
    envs = {name: machine(tmp_path, name, on_s3) for name in names}
    workers = {n: topology.start_worker(n, env=envs[n]) for n in ("worker-a", "worker-b")}
    webs = {n: topology.start_web(n, env=envs[n]) for n in ("web-a", "web-b")}
    for worker in workers.values():
        topology.wait_worker_ready(worker)
    cookie = cookie_for(alice)
    a, b = webs["web-a"], webs["web-b"]

    # A photo and a PDF uploaded through web-a; the worker that answers reads the photo from
    # the bucket and sends it to the model; web-b serves both.
    thread = anthropic_thread
    emulator.script(Script(text="A harbour at dawn.", provider="anthropic"))
    photo_bytes = image_bytes("PNG", size=(90, 60))
    files = {"harbour.png": photo_bytes, "brief.pdf": text_pdf("The brief")}
    ids = upload_attachments(a, thread, cookie, files)
    assert len(ids) == 2
    asyncio.run(post(a, str(thread.public_id), cookie, "@assistant what is in the photo?",
                     attachments=tuple(ids)))  # fmt: skip
    answered = Message.objects.filter(thread=thread, speaker="assistant", status="done")
    wait_until(answered.exists, timeout=60)
    sent = [block["source"]["data"] for request in emulator.requests
            for message in request.body.get("messages", []) if isinstance(message["content"], list)
            for block in message["content"] if block.get("type") == "image"]  # fmt: skip
    assert [base64.b64decode(data) for data in sent] == [photo_bytes]
    assert fetch(b, f"/a/{ids[0]}/", cookie) == photo_bytes
    assert fetch(b, f"/a/{ids[1]}/preview/", cookie)[:8] == b"\x89PNG\r\n\x1a\n"

    # A workspace file written through web-a is read through web-b.
    form = aiohttp.FormData()
    form.add_field("files", b"the harbour notes", filename="notes.md")
    session = thread.session
    asyncio.run(_form_post(a, f"/t/{thread.public_id}/", f"/s/{session.public_id}/files/upload/",
                           cookie, form))  # fmt: skip
    assert fetch(b, f"/s/{session.public_id}/files/download/?path=notes.md", cookie) == (
        b"the harbour notes"
    )

    # An export sent in pieces to both web processes in turn, read and imported by a worker.
    _, token = token_create(user=alice, name="importer", scope="post")
    export = json.dumps([chatgpt_trip(f"trip-{n}") for n in range(3)]).encode()
    begun = json.loads(fetch(a, "/api/v1/imports/uploads", token=token,
                             body={"name": "trips.json", "size": len(export)}))  # fmt: skip
    offset, turn = 0, 0
    while offset < len(export):
        web = (a, b)[turn % 2]
        piece = export[offset : offset + 2000]
        sent_piece = fetch(web, f"/api/v1/imports/{begun['id']}/pieces?offset={offset}",
                           token=token, body=piece)  # fmt: skip
        offset, turn = json.loads(sent_piece)["received"], turn + 1
    assert turn >= 2

    def status() -> str:
        return json.loads(fetch(b, f"/api/v1/imports/{begun['id']}", token=token))["status"]

    wait_until(lambda: status() == "ready", timeout=60)
    fetch(b, f"/api/v1/imports/{begun['id']}/start", token=token, body={"roles": {}})
    wait_until(lambda: status() == "done", timeout=60)
    assert Session.objects.filter(owner=alice, name="Lisbon trip").count() == 3
    wait_until(lambda: not list(files_under("imports/", import_storage())), timeout=30)

    # A rolling restart while replies stream: every word arrives, none twice.
    threads = numbered_threads(alice, emulator, STREAMS, words=WORDS, rate=RATE)
    tab_ids = [str(t.public_id) for t in threads]
    tabs = [FollowedTab((a, b)[n % 2], tab_ids[n], cookie, others=[(b, a)[n % 2]])
            for n in range(STREAMS)]  # fmt: skip
    stops: dict[str, float] = {}

    def done_on(thread_id: str):
        def done(tab) -> bool:
            reply = Message.objects.filter(thread__public_id=thread_id, speaker="assistant")
            found = reply.values_list("public_id", flat=True).first()
            return found is not None and tab.status(str(found)) == "done"

        return done

    def start_again(old: Child) -> Child:
        if old.name.startswith("worker"):
            child = topology.start_worker(old.name, env=envs[old.name])
            topology.wait_worker_ready(child)
            return child
        return topology.start_web(old.name, port=old.port, env=envs[old.name])

    async def restart(children: dict[str, Child], name: str) -> None:
        stops[name] = await off_the_loop(stop_and_time, children[name])
        children[name] = await off_the_loop(start_again, children[name])

    async def scenario() -> None:
        following = [asyncio.ensure_future(tab.follow(done_on(tab.thread_id))) for tab in tabs]
        await asyncio.gather(*(post(tabs[n].web, tab_ids[n], cookie, "@assistant count")
                               for n in range(STREAMS)))  # fmt: skip
        await asyncio.sleep(3)
        for children, name in ((webs, "web-a"), (workers, "worker-a"), (webs, "web-b"),
                               (workers, "worker-b")):  # fmt: skip
            await restart(children, name)
        await asyncio.wait_for(asyncio.gather(*following), 180)

    started = time.monotonic()
    asyncio.run(scenario())
    logs = topology.logs()
    print(f"rolling restart on four machines: stops {stops}, "
          f"{time.monotonic() - started:.1f} s for {len(WORDS.split())} words")  # fmt: skip
    for tab in tabs:
        reply = Message.objects.get(thread__public_id=tab.thread_id, speaker="assistant")
        assert (reply.status, reply.text) == (MessageStatus.DONE, WORDS), logs
        shown = tab.seen_texts[str(reply.public_id)]
        assert all(WORDS.startswith(text) for text in shown), "a tab showed a repeated word"
        assert set(tab.closes) <= {4012}, tab.closes
    # Nothing stored landed on any machine's disk: it is all in the bucket.
    for name in names:
        for folder in ("media", "workspaces"):
            kept = [p for p in (tmp_path / name / folder).rglob("*") if p.is_file()]
            assert kept == [], f"{name} kept {kept}"
    assert "Traceback" not in logs
