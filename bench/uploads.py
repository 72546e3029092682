"""Big uploads as a person sends them, with the web processes' memory watched.

`python -m bench.uploads [--cards 30] [--megabytes 19]` starts Parley as `make run` does, logs
in, and sends that many character-card PNGs of that size in one request to the Roles page (a
folder of big cards dropped at once), then a session's Files panel the same bytes as files.
It prints each web process's resident memory before, at its peak while the requests run, and
after. The floor, measured in the same run: the same processes idle before the upload.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import aiohttp

from bench.procs import name_of, rss_mb
from bench.servers import CSRF, Parley, browser_login


def big_card(megabytes: int, number: int) -> bytes:
    """A V2 card PNG whose picture is noise (incompressible), about `megabytes` MB."""
    from PIL import Image, PngImagePlugin

    side = int((megabytes * 1024 * 1024 / 3) ** 0.5)
    picture = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": f"Heavy {number}", "description": "A big picture."}}  # fmt: skip
    info = PngImagePlugin.PngInfo()
    info.add_text("chara", base64.b64encode(json.dumps(card).encode()).decode())
    out = io.BytesIO()
    picture.save(out, format="PNG", pnginfo=info, compress_level=1)
    return out.getvalue()


class Watch:
    """The web processes' resident memory, sampled every 50 ms while it runs."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.peak, self.stop = pids, 0.0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, rss_mb(self.pids))

    def __enter__(self) -> Watch:
        self.peak = rss_mb(self.pids)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


async def send(http: aiohttp.ClientSession, url: str, referer: str, files, **fields) -> int:
    async with http.get(referer) as page:
        token = CSRF.search(await page.text())[1]
    form = aiohttp.FormData()
    form.add_field("csrfmiddlewaretoken", token)
    for key, value in fields.items():
        form.add_field(key, value)
    for name, path, field in files:
        form.add_field(field, path.open("rb"), filename=name, content_type="image/png")
    async with http.post(url, data=form, headers={"Referer": referer}) as response:
        await response.read()
        return response.status


async def main(cards: int, megabytes: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        paths = []
        for n in range(cards):
            path = folder / f"card-{n}.png"
            path.write_bytes(big_card(megabytes, n))
            paths.append(path)
        total = sum(p.stat().st_size for p in paths) / 1048576
        (folder / "parley").mkdir()
        parley = Parley(folder / "parley")
        try:
            await parley.wait_ready()
            webs = [pid for pid in parley.pids() if name_of(pid) == "web"]
            time.sleep(2)
            idle = rss_mb(webs)
            jar = aiohttp.CookieJar(unsafe=True)  # cookies for 127.0.0.1
            endless = aiohttp.ClientTimeout(total=900)
            async with aiohttp.ClientSession(cookie_jar=jar, timeout=endless) as http:
                assert parley.credentials is not None
                await browser_login(http, parley, *parley.credentials)
                with Watch(webs) as watch:
                    status = await send(
                        http, f"{parley.url}/roles/", f"{parley.url}/roles/",
                        [(p.name, p, "cards") for p in paths],
                    )  # fmt: skip
                time.sleep(2)
                after = rss_mb(webs)
            print(f"{cards} cards of {megabytes} MB ({total:,.0f} MB) in one request to the "
                  f"Roles page: HTTP {status}")  # fmt: skip
            print(
                f"  web processes' memory: idle {idle:,.0f} MB, peak {watch.peak:,.0f} MB "
                f"(+{watch.peak - idle:,.0f}), after {after:,.0f} MB (+{after - idle:,.0f})"
            )
        finally:
            parley.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cards", type=int, default=30)
    parser.add_argument("--megabytes", type=int, default=19)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.cards, arguments.megabytes))
