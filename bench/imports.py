"""A big export imported as a person does it, with each process's memory watched.

`python -m bench.imports [--megabytes 200]` writes a ChatGPT export of that size (conversations
with edits, regenerations and tool steps), starts Parley as `make run` does, logs in, sends
the file to the Import page, reads its preview and imports it, sampling the resident memory of
the web and worker processes throughout. The floor, measured in the same run: the same
processes idle before the upload, and what reading the file whole (`json.load`, the way an
importer that does not stream reads it) costs a bare Python process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from bench.procs import name_of, rss_mb
from bench.servers import CSRF, Parley, browser_login

WORDS = ("harbour light tide rope gull anchor quay ferry lantern fog " * 40).split()


def write_export(path: Path, megabytes: int) -> int:
    """A `conversations.json` of about `megabytes` MB, written as a stream; its conversation
    count."""
    target = megabytes * 1024 * 1024
    count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        while out.tell() < target:
            if count:
                out.write(",")
            out.write(json.dumps(conversation(count)))
            count += 1
        out.write("]")
    return count


def conversation(number: int) -> dict:
    t = 1_700_000_000.0 + number * 3600
    text = " ".join(WORDS[(number + k) % len(WORDS)] for k in range(300))
    mapping: dict[str, dict] = {"root": {"id": "root", "message": None, "parent": None,
                                         "children": ["q0"]}}  # fmt: skip
    parent = "root"
    for turn in range(6):
        question, answer, again = f"q{turn}", f"a{turn}", f"r{turn}"
        mapping[parent]["children"] = [*mapping[parent].get("children", []), question]
        mapping[question] = node(
            question, parent, "user", f"Question {turn}: {text[:400]}", t + turn
        )
        mapping[answer] = node(answer, question, "assistant", text, t + turn + 0.5, "gpt-4o")
        mapping[again] = node(again, question, "assistant", text[::-1], t + turn + 0.7, "gpt-4o")
        mapping[question]["children"] = [answer, again]
        parent = answer
    return {"title": f"Harbour {number}", "create_time": t, "update_time": t + 7,
            "mapping": mapping, "current_node": parent,
            "conversation_id": f"bench-{number:06d}", "id": f"bench-{number:06d}"}  # fmt: skip


def node(key, parent, role, text, at, model=""):
    return {"id": key, "parent": parent, "children": [], "message": {
        "id": key, "author": {"role": role}, "create_time": at,
        "content": {"content_type": "text", "parts": [text]},
        "metadata": {"model_slug": model} if model else {}}}  # fmt: skip


class Watcher:
    """Peak resident memory of each Parley process, sampled every 100 ms."""

    def __init__(self, parley: Parley) -> None:
        self.parley = parley
        self.peak: dict[str, float] = {}
        self.idle: dict[str, float] = {}
        self.running = True

    def sample(self) -> dict[str, float]:
        found: dict[str, float] = {}
        for pid in self.parley.pids():
            name = name_of(pid)
            found[name] = found.get(name, 0) + rss_mb([pid])
        return found

    async def watch(self) -> None:
        self.idle = self.sample()
        while self.running:
            for name, mb in self.sample().items():
                self.peak[name] = max(self.peak.get(name, 0), mb)
            await asyncio.sleep(0.1)


def json_load_peak(path: Path) -> float:
    """Peak RSS of a bare Python that reads the file whole: what not streaming costs."""
    code = ("import json, resource, sys; json.load(open(sys.argv[1], 'rb'));"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")  # fmt: skip
    bare = "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    loaded = int(subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                                text=True, check=True).stdout)  # fmt: skip
    empty = int(subprocess.run([sys.executable, "-c", bare], capture_output=True, text=True,
                               check=True).stdout)  # fmt: skip
    return (loaded - empty) / 1024


async def run(megabytes: int, workdir: Path) -> None:
    export = workdir / "conversations.json"
    started = time.monotonic()
    count = write_export(export, megabytes)
    size = export.stat().st_size / 1024 / 1024
    print(f"export: {size:.0f} MB, {count:,} conversations, written in "
          f"{time.monotonic() - started:.0f} s")  # fmt: skip
    naive = json_load_peak(export)
    (workdir / "parley").mkdir()
    parley = Parley(workdir / "parley")
    watcher = Watcher(parley)
    try:
        await parley.wait_ready()
        await asyncio.sleep(3)  # the worker's start-up settles
        task = asyncio.ensure_future(watcher.watch())
        jar = aiohttp.CookieJar(unsafe=True)  # cookies from 127.0.0.1
        endless = aiohttp.ClientTimeout(total=None)
        async with aiohttp.ClientSession(cookie_jar=jar, timeout=endless) as http:
            assert parley.credentials is not None
            await browser_login(http, parley, *parley.credentials)
            async with http.get(f"{parley.url}/account/import/") as response:
                token = CSRF.search(await response.text())[1]
            marks = {"start": time.monotonic()}
            job_url = parley.url + await send_in_pieces(http, parley.url, token, export)
            marks["uploaded"] = time.monotonic()
            page = await wait_for(http, job_url, "ready")
            marks["previewed"] = time.monotonic()
            fields = dict(re.findall(r'<select id="(role_\d+)"', page) and [("role_0", "new")])
            token = CSRF.search(page)[1]
            async with http.post(job_url + "start/", data={"csrfmiddlewaretoken": token, **fields},
                                 allow_redirects=False) as response:  # fmt: skip
                assert response.status == 302, response.status
            page = await wait_for(http, job_url, "done")
            marks["imported"] = time.monotonic()
        watcher.running = False
        await task
        made = re.search(r"([\d,]+) sessions? made", page)
        print(f"upload {marks['uploaded'] - marks['start']:.1f} s · preview "
              f"{marks['previewed'] - marks['uploaded']:.1f} s · import "
              f"{marks['imported'] - marks['previewed']:.1f} s · "
              f"{made[1] if made else '?'} sessions made")  # fmt: skip
        print("\n| process | idle RSS | peak RSS during upload, preview and import | growth |")
        print("|---|---:|---:|---:|")
        for name in sorted(watcher.peak):
            idle = watcher.idle.get(name, 0)
            print(f"| {name} | {idle:.0f} MB | {watcher.peak[name]:.0f} MB | "
                  f"{watcher.peak[name] - idle:+.0f} MB |")  # fmt: skip
        print(f"| floor: `json.load` of the file in a bare Python | | {naive:.0f} MB | |")
    finally:
        parley.stop()


async def send_in_pieces(http: aiohttp.ClientSession, url: str, token: str, path: Path) -> str:
    """What the Import page's script does: the file's name and size, then its pieces in order."""
    headers = {"X-CSRFToken": token}
    form = {"name": path.name, "size": str(path.stat().st_size)}
    async with http.post(f"{url}/account/import/begin/", data=form, headers=headers) as response:
        state = await response.json()
    with path.open("rb") as handle:
        while state["received"] < state["size"]:
            handle.seek(state["received"])
            piece = handle.read(state["piece_bytes"])
            async with http.post(f"{url}{state['piece_url']}?offset={state['received']}",
                                 data=piece, headers=headers) as response:  # fmt: skip
                state = await response.json()
    return state["page"]


async def wait_for(http: aiohttp.ClientSession, url: str, status: str) -> str:
    while True:
        async with http.get(url) as response:
            page = await response.text()
        found = re.search(r'data-status="(\w+)"', page)
        if found and found[1] == status:
            return page
        if found and found[1] in ("failed", "cancelled"):
            raise RuntimeError(f"the import ended {found[1]}: {page[-2000:]}")
        await asyncio.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="parley-import-bench-") as folder:
        asyncio.run(run(args.megabytes, Path(folder)))


if __name__ == "__main__":
    main()
