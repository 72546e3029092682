"""The live path under load, measured from outside as a browser uses it.

Starts Parley as `make run` does (`config.launcher`: SQLite, embedded Redis, one daphne, one
Celery worker) in a scratch directory, with a loopback OpenAI-compatible upstream (the
project's emulator) streaming a fixed number of tokens at a fixed interval after a fixed time
to first token. For each load it opens one thread per stream, logs in over HTTP, opens each
thread's websocket and sends `sync`, then posts every composer message at once, and reads
the frames until every reply has settled. It prints, per load and interval:

- relay p50/p95: the upstream's first token → the first delta on the websocket;
- TTFT overhead p50/p95: POST start → first delta, minus the upstream's own time to first token;
- exact: replies whose deltas add up to exactly the upstream's text; errors: the others;
- delivered tokens/s over the run; CPU (web + worker + redis, from /proc) per reply and per
  token; and idle RSS of every process once at the start.

Run: `make bench` (everything), or `python -m bench.streaming --streams 1 20 --intervals 25`.
Nothing here is asserted: the numbers go in the README, side by side, from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from yarl import URL

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
DELTA = re.compile(
    r'<span id="msg-([0-9a-f-]{36})-text" hx-swap-oob="beforeend">(.*?)</span>', re.S
)
SETTLED = re.compile(
    r'<article id="msg-([0-9a-f-]{36})"[^>]*data-status="(done|error|interrupted)"'
)
REPLY = re.compile(r'<article id="msg-([0-9a-f-]{36})"[^>]*data-status="queued"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pids_under(root: int) -> list[int]:
    """The launcher's descendants (daphne, the worker, redis-server)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / TICKS


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


@dataclass
class Stream:
    thread_id: str
    prompt: str
    reply_id: str = ""
    posted_at: float = 0.0
    first_delta_at: float | None = None
    text: str = ""
    status: str = ""


@dataclass
class Result:
    streams: int
    interval_ms: int
    relay_ms: list[float] = field(default_factory=list)
    overhead_ms: list[float] = field(default_factory=list)
    exact: int = 0
    errors: int = 0
    tokens_per_second: float = 0.0
    cpu_per_reply_ms: float = 0.0
    cpu_per_token_ms: float = 0.0
    seconds: float = 0.0


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Parley:
    """Parley started as `make run` starts it, in a scratch directory."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
        env.update(PORT=str(self.port), PARLEY_VAR_DIR=str(workdir), PYTHONUNBUFFERED="1")
        env["DEBUG"] = "false"  # as deployed: no per-query debug log, no template reloads
        env["DJANGO_SETTINGS_MODULE"] = "config.settings"
        self.env = env
        self.log = (workdir / "launcher.log").open("w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.launcher"], cwd=ROOT, env=env,
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.workdir = workdir

    def output(self) -> str:
        return (self.workdir / "launcher.log").read_text()

    async def wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(self.output())
                try:
                    async with http.get(f"{self.url}/login/") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.5)
        raise RuntimeError("Parley did not start:\n" + self.output())

    def login(self) -> tuple[str, str]:
        match = re.search(r"local login: (\S+) / (\S+)", self.output())
        if match is None:
            raise RuntimeError("No local login in the launcher's output")
        return match[1], match[2]

    def redis_url(self) -> str:
        match = re.search(r"Embedded Redis-compatible server on (\S+)", self.output())
        return match[1] if match else ""

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def prepare(parley: Parley, username: str, upstream: str, count: int) -> list[str]:
    """A credential for the upstream and `count` threads, through the services (as the
    credential page and New chat would)."""
    os.environ.update(
        PARLEY_VAR_DIR=str(parley.workdir), REDIS_URL=parley.redis_url(),
        DJANGO_SETTINGS_MODULE="config.settings",
    )  # fmt: skip
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from apps.chat.records.sessions import session_create, session_set_provider
    from apps.chat.records.threads import thread_create
    from apps.providers.services import credential_save

    user = get_user_model().objects.get(username=username)
    credential = credential_save(
        owner=user, name="bench upstream", provider="openai_compatible", api_key="bench",
        base_url=upstream,
    )  # fmt: skip
    session = session_create(owner=user, name="Streaming bench")
    session_set_provider(session=session, credential=credential, model="bench-model")
    return [str(thread_create(session=session).public_id) for _ in range(count)]


async def browser_login(http: aiohttp.ClientSession, parley: Parley, user: str, password: str):
    async with http.get(f"{parley.url}/login/") as response:
        token = CSRF.search(await response.text())[1]
    data = {"username": user, "password": password, "csrfmiddlewaretoken": token}
    async with http.post(f"{parley.url}/login/", data=data, allow_redirects=False) as response:
        if response.status != 302:
            raise RuntimeError(f"login failed: {response.status}")


async def run_stream(http, parley: Parley, stream: Stream, start: asyncio.Event, csrf: str):
    try:
        await _run_stream(http, parley, stream, start, csrf)
    except (aiohttp.ClientError, TypeError) as exc:  # a closed socket counts as an error
        stream.status = f"{type(exc).__name__}: {exc}"


async def _run_stream(http, parley: Parley, stream: Stream, start: asyncio.Event, csrf: str):
    ws_url = parley.url.replace("http", "ws") + f"/ws/threads/{stream.thread_id}/"
    async with http.ws_connect(ws_url, headers={"Origin": parley.url}, max_msg_size=0) as ws:
        await ws.send_str(json.dumps({"type": "sync", "after_seq": 0, "pending": []}))
        while 'id="sync-state"' not in (await ws.receive_str()):
            pass
        await start.wait()
        stream.posted_at = time.monotonic()
        async with http.post(
            f"{parley.url}/t/{stream.thread_id}/messages/",
            data={"text": stream.prompt},
            headers={"X-CSRFToken": csrf, "HX-Request": "true", "Referer": parley.url},
        ) as response:
            body = await response.text()
            if response.status != 200 or not REPLY.search(body):
                stream.status = f"POST {response.status}"
                return
            stream.reply_id = REPLY.search(body)[1]
        while True:
            frame = await ws.receive_str()
            for message_id, text in DELTA.findall(frame):
                if message_id == stream.reply_id:
                    if stream.first_delta_at is None:
                        stream.first_delta_at = time.monotonic()
                    stream.text += html.unescape(text)
            settled = [s for m, s in SETTLED.findall(frame) if m == stream.reply_id]
            if settled:
                stream.status = settled[0]
                return


async def run_level(parley, emulator, threads, credentials, count: int, interval_ms: int,
                    tokens: int, ttft_ms: int) -> Result:  # fmt: skip
    from apps.providers.emulator import Script

    word = "word "
    expected = word * tokens
    rate = 1000 / interval_ms if interval_ms else 0
    emulator.reset()
    emulator.script(
        *[Script(text=expected, chunk_chars=len(word), tokens_per_second=rate, ttft_ms=ttft_ms)
          for _ in range(count)]
    )  # fmt: skip
    streams = [
        Stream(thread, f"Stream {n} at {interval_ms} ms")
        for n, thread in enumerate(threads[:count])
    ]
    pids = pids_under(parley.process.pid)
    start = asyncio.Event()
    jar = aiohttp.CookieJar(unsafe=True)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(cookie_jar=jar, connector=connector) as http:
        await browser_login(http, parley, *credentials)
        async with http.get(f"{parley.url}/t/{threads[0]}/") as response:
            await response.text()
        csrf = jar.filter_cookies(URL(parley.url))["csrftoken"].value
        tasks = [asyncio.create_task(run_stream(http, parley, s, start, csrf)) for s in streams]
        await asyncio.sleep(1.0)  # every socket open and synced
        cpu_before, began = cpu_seconds(pids), time.monotonic()
        start.set()
        await asyncio.wait(tasks, timeout=300)
        seconds, cpu = time.monotonic() - began, cpu_seconds(pids) - cpu_before
    result = Result(streams=count, interval_ms=interval_ms, seconds=seconds)
    requests = {}
    for record in emulator.requests:
        body = json.dumps(record.body, ensure_ascii=False)
        for stream in streams:
            if stream.prompt in body:
                requests[stream.prompt] = record
    for stream in streams:
        record = requests.get(stream.prompt)
        if stream.status == "done" and stream.text.rstrip() == expected.rstrip():
            result.exact += 1
        else:
            result.errors += 1
        if record and record.first_byte and stream.first_delta_at:
            result.relay_ms.append((stream.first_delta_at - record.first_byte) * 1000)
            upstream_ttft = record.first_byte - record.started
            result.overhead_ms.append(
                (stream.first_delta_at - stream.posted_at - upstream_ttft) * 1000
            )
    delivered = sum(len(s.text) // len(word) for s in streams)
    result.tokens_per_second = delivered / seconds if seconds else 0
    result.cpu_per_reply_ms = cpu / count * 1000
    result.cpu_per_token_ms = cpu / max(1, delivered) * 1000
    return result


def table(results: list[Result], tokens: int) -> str:
    def pair(values: list[float], digits: int) -> str:
        return f"{percentile(values, 0.5):.{digits}f} / {percentile(values, 0.95):.{digits}f} ms"

    lines = [
        "| streams | interval | relay p50 / p95 | TTFT overhead p50 / p95 | exact | errors "
        "| tokens/s | CPU per reply | CPU per token |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.streams} | {r.interval_ms} ms | {pair(r.relay_ms, 1)} "
            f"| {pair(r.overhead_ms, 0)} | {r.exact} | {r.errors} | {r.tokens_per_second:,.0f} "
            f"| {r.cpu_per_reply_ms:.0f} ms | {r.cpu_per_token_ms:.2f} ms |"
        )
    return "\n".join(lines) + f"\n\n{tokens} tokens per reply."


async def main_async(args) -> None:
    from apps.providers.emulator import Emulator

    emulator = Emulator().start_in_thread()
    with tempfile.TemporaryDirectory(prefix="parley-bench-") as scratch:
        parley = Parley(Path(scratch))
        try:
            await parley.wait_ready()
            credentials = parley.login()
            threads = await asyncio.to_thread(
                prepare, parley, credentials[0], emulator.url + "/v1", max(args.streams)
            )
            await asyncio.sleep(2)
            pids = [*pids_under(parley.process.pid), parley.process.pid]
            print(f"Idle RSS, all processes: {rss_mb(pids):.0f} MB "
                  f"(web + worker + redis: {rss_mb(pids[:-1]):.0f} MB)")  # fmt: skip
            # One unmeasured reply first: the worker imports the SDK and warms its caches.
            await run_level(parley, emulator, threads, credentials, 1, 0, 20, 0)
            results = []
            for count in args.streams:
                for interval in args.intervals:
                    result = await run_level(
                        parley,
                        emulator,
                        threads,
                        credentials,
                        count,
                        interval,
                        args.tokens,
                        args.ttft,
                    )
                    results.append(result)
                    print(table([result], args.tokens).splitlines()[2], flush=True)
            print()
            print(table(results, args.tokens))
            problems = sorted({line for line in parley.output().splitlines() if "Error" in line})
            if problems:
                print("\nErrors the server logged (first 10 kinds):", *problems[:10], sep="\n")
        finally:
            parley.stop()
            emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 20, 100, 200])
    parser.add_argument("--intervals", type=int, nargs="+", default=[0, 10, 25])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--ttft", type=int, default=100, help="upstream time to first token, ms")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
