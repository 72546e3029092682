"""The live path under load, measured from outside as a browser uses it, against a floor.

Starts Parley as `make run` does (`config.launcher`: SQLite, embedded Redis, one daphne, one
Celery worker) in a scratch directory — or on PostgreSQL and the machine's Redis with
`--production` — and, in the same run, the floor (`bench/floor.py`: the simplest relay of the
same upstream to a websocket, one process). The upstream is the project's loopback emulator
(OpenAI-compatible) streaming a fixed number of tokens at a fixed interval after a fixed time
to first token. For each load and each server it opens one thread per stream, logs in over
HTTP, opens each thread's websocket and sends `sync`, then posts every composer message at
once, and reads the frames until every reply has settled. It prints, per load:

- relay p50/p95: the upstream's first token → the first delta on the websocket;
- mid-stream lag p50/p95: every piece of text, from the moment the upstream wrote it to the
  moment the client held it (not only the first: batching shows here);
- TTFT overhead p50: POST start → first delta, minus the upstream's own time to first token;
- POST: the composer POST's answer time; tail: the upstream's `[DONE]` → the settled bubble;
- idle CPU: every process of each server over a minute with nothing to do (`--idle`);
- finished: replies the client saw settle; exact: those whose deltas are exactly the upstream's
  text; delivered tokens/s; CPU (every process of the server, from /proc) per reply;
- each figure for Parley, for the floor, and their ratio.

The single-stream loads (the one-token reply, the fixed cost; one 200-token stream) run
`--repeat` times (10) and report the median over those replies, not one sample.

With `--open-webui EXECUTABLE` (an `open-webui` installed apart), Open WebUI runs as a third
server in the same run, driven as its page drives it (`bench/peer.py`): the peer issue 36
measures Parley against. `--busy N` keeps N CPU hogs running meanwhile (a shared host).

Run: `make bench` (everything), or `python -m bench.streaming --streams 1 20 --intervals 25`.
Nothing here is asserted: the numbers go in the README, side by side, from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from yarl import URL

from bench.busy import busy_host
from bench.peer import OpenWebUI
from bench.procs import cpu_seconds, name_of, profiled, pss_mb, rss_mb
from bench.servers import Floor, Parley, browser_login, prepare

ROOT = Path(__file__).resolve().parent.parent
DELTA = re.compile(
    r'<span id="msg-([0-9a-f-]{36})-text" hx-swap-oob="beforeend">(.*?)</span>', re.S
)
SETTLED = re.compile(
    r'<article id="msg-([0-9a-f-]{36})"[^>]*data-status="(done|error|interrupted)"'
)
REPLY = re.compile(r'<article id="msg-([0-9a-f-]{36})"[^>]*data-status="queued"')


@dataclass
class Stream:
    thread_id: str
    prompt: str
    reply_id: str = ""
    posted_at: float = 0.0
    answered_at: float | None = None
    first_delta_at: float | None = None
    settled_at: float | None = None
    text: str = ""
    status: str = ""
    # (when, characters shown so far) at each delta the client received.
    arrivals: list[tuple[float, int]] = field(default_factory=list)


@dataclass
class Result:
    server: str
    streams: int
    interval_ms: int
    tokens: int
    relay_ms: list[float] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)  # every piece: written → shown
    overhead_ms: list[float] = field(default_factory=list)
    post_ms: list[float] = field(default_factory=list)
    tail_ms: list[float] = field(default_factory=list)
    finished: int = 0
    exact: int = 0
    tokens_per_second: float = 0.0
    cpu_per_reply_ms: float = 0.0
    replies: int = 0  # over repeated runs of the level (0: one run, `streams` replies)
    cpu_by_process: dict[str, float] = field(default_factory=dict)  # ms per reply, by kind

    def p50(self, name: str) -> float:
        return percentile(getattr(self, name), 0.5)

    def p95(self, name: str) -> float:
        return percentile(getattr(self, name), 0.95)


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run_stream(http, server, stream: Stream, start: asyncio.Event, csrf: str):
    try:
        await _run_stream(http, server, stream, start, csrf)
    except (aiohttp.ClientError, TypeError) as exc:  # a closed socket counts as an error
        stream.status = f"{type(exc).__name__}: {exc}"


async def _run_stream(http, server, stream: Stream, start: asyncio.Event, csrf: str):
    ws_url = server.url.replace("http", "ws") + f"/ws/threads/{stream.thread_id}/"
    async with http.ws_connect(ws_url, headers={"Origin": server.url}, max_msg_size=0) as ws:
        await ws.send_str(json.dumps({"type": "sync", "after_seq": 0, "pending": []}))
        while 'id="sync-state"' not in (await ws.receive_str()):
            pass
        await start.wait()
        stream.posted_at = time.monotonic()
        async with http.post(
            f"{server.url}/t/{stream.thread_id}/messages/",
            data={"text": stream.prompt},
            headers={"X-CSRFToken": csrf, "HX-Request": "true", "Referer": server.url},
        ) as response:
            body = await response.text()
            stream.answered_at = time.monotonic()
            if response.status != 200 or not REPLY.search(body):
                queued = " (queued behind a turn)" if 'id="queued-' in body else ""
                # What the answer holds after the composer (its bubbles, its status line).
                shown = body.split("</form>", 1)[-1] if response.status == 200 else body
                said = " ".join(re.sub(r"<[^>]+>", " ", shown).split())[:300]
                stream.status = f"POST {response.status}{queued}: {said}"
                return
            stream.reply_id = REPLY.search(body)[1]
        while True:
            frame = await ws.receive_str()
            for message_id, text in DELTA.findall(frame):
                if message_id == stream.reply_id:
                    if stream.first_delta_at is None:
                        stream.first_delta_at = time.monotonic()
                    stream.text += html.unescape(text)
                    stream.arrivals.append((time.monotonic(), len(stream.text)))
            settled = [s for m, s in SETTLED.findall(frame) if m == stream.reply_id]
            if settled:
                stream.settled_at = time.monotonic()
                stream.status = settled[0]
                return


async def _say_where_it_stopped(server, stream: Stream, record) -> None:
    """For a reply the client did not see settle: what the upstream sent, and what the
    server's own page shows of it now (a push the tab missed, or a reply that never ended)."""
    upstream = "no request" if record is None else (
        f"request started, {len(record.text_written or '')} chars written, "
        f"{'ended' if record.ended else 'not ended'}"
    )  # fmt: skip
    shown = "not asked"
    if stream.reply_id and getattr(server, "credentials", None):
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            await browser_login(http, server, *server.credentials)
            async with http.get(f"{server.url}/t/{stream.thread_id}/") as response:
                page = await response.text()
        found = re.search(rf'id="msg-{stream.reply_id}"[^>]*data-status="(\w+)"', page)
        shown = f"the page shows it {found[1] if found else 'nowhere'}"
    seen = stream.status or "nothing"
    print(
        f"  {stream.prompt}: reply {stream.reply_id or '?'}, client saw {seen} after "
        f"{len(stream.text)} chars; upstream: {upstream}; {shown}",
        flush=True,
    )


async def run_level(server, emulator, threads, count: int, interval_ms: int, tokens: int,
                    ttft_ms: int, profile: tuple[Path | None, str] | None = None
                    ) -> Result:  # fmt: skip
    """One load on one server; with `profile` (folder, label), py-spy samples the server's
    processes through the measured part (from the posts to the last settled reply)."""
    from apps.providers.emulator import Script

    word = "word "
    expected = word * tokens
    rate = 1000 / interval_ms if interval_ms else 0
    emulator.reset()
    run = uuid.uuid4().hex[:8]
    streams = [
        Stream(thread, f"Stream {n} at {interval_ms} ms, run {run}")
        for n, thread in enumerate(threads[:count])
    ]
    # Each stream's reply answers its own prompt: whatever else a server asks the model (Open
    # WebUI's title, tags and follow-ups) gets the emulator's short default reply.
    emulator.script(
        *[Script(text=expected, chunk_chars=len(word), tokens_per_second=rate, ttft_ms=ttft_ms,
                 match=stream.prompt) for stream in streams]
    )  # fmt: skip
    pids = server.pids()
    start = asyncio.Event()
    jar = aiohttp.CookieJar(unsafe=True)
    connector = aiohttp.TCPConnector(limit=0)
    csrf = ""
    async with aiohttp.ClientSession(cookie_jar=jar, connector=connector) as http:
        if server.credentials:
            await browser_login(http, server, *server.credentials)
            async with http.get(f"{server.url}/t/{threads[0]}/") as response:
                await response.text()
            csrf = jar.filter_cookies(URL(server.url))["csrftoken"].value
        if hasattr(server, "stream_reply"):  # the peer: its own API, no page or socket
            tasks = [asyncio.create_task(server.stream_reply(http, s, start)) for s in streams]
        else:
            tasks = [asyncio.create_task(run_stream(http, server, s, start, csrf))
                     for s in streams]  # fmt: skip
        await asyncio.sleep(1.0 + count / 100)  # every socket open and synced
        folder, label = profile or (None, "")
        with profiled(pids, folder, label):
            each_before = {pid: cpu_seconds([pid]) for pid in pids}
            began = time.monotonic()
            start.set()
            await asyncio.wait(tasks, timeout=300)
            await _model_calls_done(emulator, count * getattr(server, "model_calls", 1))
            seconds = time.monotonic() - began
            each = {pid: cpu_seconds([pid]) - before for pid, before in each_before.items()}
            cpu = sum(each.values())
    result = Result(server=server.name, streams=count, interval_ms=interval_ms, tokens=tokens)
    requests = {}
    for record in emulator.requests:
        body = json.dumps(record.body, ensure_ascii=False)
        for stream in streams:
            if stream.prompt in body:
                requests.setdefault(stream.prompt, record)  # the reply's, not a later task's
    for stream in streams:
        record = requests.get(stream.prompt)
        if stream.settled_at is not None:
            result.finished += 1
        if stream.status == "done" and stream.text.rstrip() == expected.rstrip():
            result.exact += 1
        if stream.answered_at is not None:
            result.post_ms.append((stream.answered_at - stream.posted_at) * 1000)
        if record and record.first_byte and stream.first_delta_at:
            result.relay_ms.append((stream.first_delta_at - record.first_byte) * 1000)
            upstream_ttft = record.first_byte - record.started
            result.overhead_ms.append(
                (stream.first_delta_at - stream.posted_at - upstream_ttft) * 1000
            )
        if record:
            result.lag_ms += mid_stream_lags(record.text_written, stream.arrivals, expected)
        if record and record.ended and stream.settled_at:
            result.tail_ms.append((stream.settled_at - record.ended) * 1000)
    delivered = sum(len(s.text) // len(word) for s in streams)
    unfinished = Counter(s.status or "no answer" for s in streams if s.status != "done")
    if unfinished:
        print(f"{server.name}, {count} streams: not done: {dict(unfinished)}", flush=True)
        for stream in streams:
            if stream.status != "done":
                await _say_where_it_stopped(server, stream, requests.get(stream.prompt))
    result.tokens_per_second = delivered / seconds if seconds else 0
    result.cpu_per_reply_ms = cpu / count * 1000
    for pid, used in each.items():
        kind = name_of(pid)
        result.cpu_by_process[kind] = result.cpu_by_process.get(kind, 0) + used / count * 1000
    return result


def mid_stream_lags(
    written: list[tuple[float, int]], arrivals: list[tuple[float, int]], text: str
) -> list[float]:
    """For every piece the upstream wrote: how long until the client held it (ms). A piece's
    trailing blanks do not count (a server may hold them for the text that follows)."""
    lags, shown = [], 0
    for when, upto in written:
        needed = len(text[:upto].rstrip())
        while shown < len(arrivals) and arrivals[shown][1] < needed:
            shown += 1
        if shown == len(arrivals):
            break  # never shown (the reply did not finish): counted in "finished", not here
        lags.append((arrivals[shown][0] - when) * 1000)
    return lags


async def _model_calls_done(emulator, expected: int) -> None:
    """Wait (up to 30 s) for the model calls a server makes after a reply has shown (Open
    WebUI's title, tags and follow-ups), so their CPU counts in the reply's."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        len(emulator.requests) < expected or any(r.ended is None for r in emulator.requests)
    ):
        await asyncio.sleep(0.05)


def merged(runs: list[Result]) -> Result:
    """One result from repeated runs of a level: every sample kept, CPU and tokens averaged."""
    first = runs[0]
    result = Result(first.server, first.streams, first.interval_ms, first.tokens)
    for run in runs:
        for name in ("relay_ms", "lag_ms", "overhead_ms", "post_ms", "tail_ms"):
            getattr(result, name).extend(getattr(run, name))
        result.finished += run.finished
        result.exact += run.exact
    result.replies = sum(run.streams for run in runs)
    result.cpu_per_reply_ms = sum(run.cpu_per_reply_ms for run in runs) / len(runs)
    for run in runs:
        for kind, used in run.cpu_by_process.items():
            result.cpu_by_process[kind] = result.cpu_by_process.get(kind, 0) + used / len(runs)
    result.tokens_per_second = sum(run.tokens_per_second for run in runs) / len(runs)
    return result


FIGURES = [
    ("relay p50", "relay_ms", 50), ("relay p95", "relay_ms", 95),
    ("mid-stream lag p50", "lag_ms", 50), ("mid-stream lag p95", "lag_ms", 95),
    ("TTFT overhead p50", "overhead_ms", 50), ("POST p50", "post_ms", 50),
    ("tail p50", "tail_ms", 50),
]  # fmt: skip


def ratio(ours: float, theirs: float) -> str:
    if theirs != theirs or ours != ours or theirs <= 0:  # NaN or zero
        return "-"
    return f"{ours / theirs:.2f}x"


def compare(parley: Result, floor: Result, peer: Result | None = None) -> list[str]:
    """One row per figure: Parley, the floor and their ratio (and, with a peer, the peer's
    figure and Parley's against it)."""

    def row(name: str, ours: float, theirs: float, its: float | None, unit: str) -> str:
        cells = f"| {label} | {name} | {ours:,.1f}{unit} | {theirs:,.1f}{unit} | "
        cells += ratio(ours, theirs) + " |"
        if its is not None:
            cells += f" {its:,.1f}{unit} | {ratio(ours, its)} |"
        return cells

    label = f"{parley.streams} x {parley.tokens} tok @ {parley.interval_ms} ms"
    rows = []
    for name, attr, share in FIGURES:
        rows.append(row(name, *(
            percentile(getattr(result, attr), share / 100) if result else None
            for result in (parley, floor, peer)
        ), " ms"))  # fmt: skip
    split = ", ".join(f"{kind} {ms:,.0f}" for kind, ms in sorted(parley.cpu_by_process.items()))
    rows.append(row(f"CPU per reply ({split})", parley.cpu_per_reply_ms,
                    floor.cpu_per_reply_ms, peer.cpu_per_reply_ms if peer else None,
                    " ms"))  # fmt: skip
    # tokens/s: higher is better, so the ratio is theirs over ours like the others' "x slower"
    tps = [r.tokens_per_second if r else None for r in (parley, floor, peer)]
    cells = f"| {label} | tokens/s | {tps[0]:,.0f} | {tps[1]:,.0f} | {ratio(tps[1], tps[0])} |"
    if peer:
        cells += f" {tps[2]:,.0f} | {ratio(tps[2], tps[0])} |"
    rows.append(cells)
    cells = " | ".join(f"{r.finished} / {r.exact} of {r.replies or r.streams}"
                       for r in (parley, floor, peer) if r)  # fmt: skip
    rows.append(f"| {label} | finished / exact | {cells} | |" + (" |" if peer else ""))
    return rows


HEADER = ["| load | figure | Parley | floor | ratio |", "|---|---|---:|---:|---:|"]
PEER_HEADER = ["| load | figure | Parley | floor | ratio | Open WebUI | Parley / Open WebUI |",
               "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip


async def idle_cpu(servers, seconds: float) -> None:
    """CPU each server spends with nothing to do (every process, after the warm-up): the
    timers, sweeps and heartbeats that run whether or not anyone chats."""
    pids = {server.name: server.pids() for server in servers}
    before = {name: cpu_seconds(own) for name, own in pids.items()}
    await asyncio.sleep(seconds)
    used = {name: (cpu_seconds(own) - before[name]) * 1000 for name, own in pids.items()}
    print(f"Idle CPU over {seconds:.0f} s: " + ", ".join(
        f"{name} {ms:,.0f} ms ({ms / seconds / 10:.2f} % of a core)" for name, ms in used.items()
    ), flush=True)  # fmt: skip


async def measure_loads(args, loads, servers, emulator, threads) -> list[str]:
    """Each load on Parley, the floor (and the peer), side by side (interleaved): the table's
    rows."""
    rows: list[str] = []
    parley = servers[0]
    for count, interval, tokens in loads:
        # One reply is one sample: the single-stream loads run `--repeat` times.
        repeat = args.repeat if count == 1 else 1
        pair = []
        for server in servers:
            runs = []
            for n in range(repeat):
                label = f"{count}x{tokens}-{interval}ms-{n}"
                runs.append(await run_level(server, emulator, threads[server.name],
                                            count, interval, tokens, args.ttft,
                                            profile=(args.profile, label)
                                            if server is parley else None))  # fmt: skip
                await asyncio.sleep(1)
            pair.append(merged(runs))
        rows += compare(*pair)
        print("\n".join(compare(*pair)), flush=True)
    return rows


async def main_async(args) -> None:
    from apps.providers.emulator import Emulator

    emulator = Emulator().start_in_thread()
    upstream = emulator.url + "/v1"
    with tempfile.TemporaryDirectory(prefix="parley-bench-") as scratch:
        parley = Parley(Path(scratch), production=args.production)
        floor = Floor(Path(scratch), upstream)
        servers = [parley, floor]
        if args.open_webui:
            servers.append(OpenWebUI(Path(scratch), upstream, args.open_webui,
                                     tasks=not args.open_webui_light))  # fmt: skip
        try:
            for server in servers:
                await server.wait_ready()
            most = max(args.streams)
            threads = {server.name: server.threads(most) for server in servers[1:]}
            threads[parley.name] = await asyncio.to_thread(prepare, parley, upstream, most)
            await asyncio.sleep(2)
            pids = [*parley.pids(), parley.process.pid]
            print(f"Idle memory, all processes: PSS {pss_mb(pids):.0f} MB, RSS "
                  f"{rss_mb(pids):.0f} MB (without the launcher: PSS {pss_mb(pids[:-1]):.0f} MB)",
                  flush=True)  # fmt: skip
            for server in servers[2:]:
                print(f"Idle memory, {server.name}: PSS {pss_mb(server.pids()):.0f} MB, "
                      f"RSS {rss_mb(server.pids()):.0f} MB", flush=True)  # fmt: skip
            for server in servers:  # unmeasured: imports, caches, connections of
                for _ in range(3):  # every process (several streams reach each of them)
                    await run_level(server, emulator, threads[server.name], 8, 0, 20, 0)
            if args.idle:
                await idle_cpu(servers, args.idle)
            # The fixed cost of a reply first (one token), then the loads.
            loads = [(1, args.intervals[0], 1)] + [
                (count, interval, args.tokens)
                for count in args.streams
                for interval in args.intervals
            ]
            rows = []
            with busy_host(args.busy):
                rows = await measure_loads(args, loads, servers, emulator, threads)
            print()
            print("\n".join((PEER_HEADER if args.open_webui else HEADER) + rows))
            busy = f"; {args.busy} CPU hogs running" if args.busy else ""
            print(
                f"\nUpstream: {args.ttft} ms to the first token; "
                f"{'PostgreSQL + Redis' if args.production else 'SQLite + embedded Redis'}{busy}."
            )

            problems = sorted({line for line in parley.output().splitlines()
                               if "Error" in line or "WARNING" in line})  # fmt: skip
            if problems:
                print("\nWhat the server logged (first 10 kinds):", *problems[:10], sep="\n")
        finally:
            for server in servers:
                server.stop()
            emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 20, 100, 200])
    parser.add_argument("--intervals", type=int, nargs="+", default=[25])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--ttft", type=int, default=100, help="upstream time to first token, ms")
    parser.add_argument(
        "--repeat", type=int, default=10, help="runs of each single-stream load (p50 over them)"
    )
    parser.add_argument(
        "--production", action="store_true", help="PostgreSQL and the machine's Redis"
    )
    parser.add_argument(
        "--idle", type=float, default=60,
        help="seconds of nothing to do, each server's CPU meanwhile (0: skip)",
    )  # fmt: skip
    parser.add_argument(
        "--busy", type=int, default=0, help="CPU hogs running meanwhile (a shared host)"
    )
    parser.add_argument(
        "--profile", type=Path, metavar="FOLDER",
        help="py-spy samples each of Parley's processes through each load, into FOLDER",
    )  # fmt: skip
    parser.add_argument(
        "--open-webui", type=Path, metavar="EXECUTABLE",
        help="also run Open WebUI (its `open-webui` command, installed apart) side by side",
    )  # fmt: skip
    parser.add_argument(
        "--open-webui-light", action="store_true",
        help="Open WebUI without the title, tags and follow-ups its page asks for by default",
    )  # fmt: skip
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
