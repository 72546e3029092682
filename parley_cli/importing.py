"""`parley import FILE`: send an export, show what importing it makes, import it with a
progress line, and say what was made."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from parley_cli.client import Api, ApiError

POLL_SECONDS = 0.5
PIECE_BYTES = 8 * 1024 * 1024  # the server's limit for one piece


async def run_import(
    api: Api,
    path: Path,
    *,
    roles: dict[str, str],
    yes: bool,
    confirm: Callable[[str], bool] | None = None,
    say: Callable[[str], None] = print,
) -> int:
    job = await upload(api, path)
    say(f"Reading {path.name}…")
    while job["status"] == "reading":
        await asyncio.sleep(POLL_SECONDS)
        job = await api.call("GET", f"/imports/{job['id']}")
    if job["status"] != "ready":
        say(f"Could not import {path.name}: {job['error'] or job['status']}")
        return 2
    for line in preview_lines(job["preview"]):
        say(line)
    count = job["preview"]["conversations"]
    if not count:
        await api.call("POST", f"/imports/{job['id']}/cancel")
        say("Nothing new to import.")
        return 0
    ask = confirm or _ask
    if not yes and not ask(f"Import {count:,} conversation{'s' if count != 1 else ''}? [y/N] "):
        await api.call("POST", f"/imports/{job['id']}/cancel")
        say("Nothing imported.")
        return 1
    job = await api.call("POST", f"/imports/{job['id']}/start", json={"roles": roles})
    try:
        while job["status"] == "importing":
            say_progress(job)
            await asyncio.sleep(POLL_SECONDS)
            job = await api.call("GET", f"/imports/{job['id']}")
    except (KeyboardInterrupt, asyncio.CancelledError):
        await api.call("POST", f"/imports/{job['id']}/cancel")
        raise
    print(file=sys.stderr)
    report = job["report"]
    say(f"{job['status'].capitalize()}: {report.get('made', 0):,} sessions made, "
        f"{report.get('already', 0):,} already imported before.")  # fmt: skip
    for broken in report.get("broken", []):
        say(f"  not imported: conversation {broken['position']} “{broken['title']}”: "
            f"{broken['reason']}")  # fmt: skip
    for problem in report.get("problems", []):
        say(f"  left out: {problem}")
    if job["error"]:
        say(job["error"])
    return 0 if job["status"] == "done" else 1


async def upload(api: Api, path: Path) -> dict:
    """Send the file in pieces, read from the disk one at a time (a 2 GB export never sits in
    this process's memory, nor in the server's)."""
    try:
        size = path.stat().st_size
        handle = path.open("rb")
    except OSError as exc:
        raise ApiError(0, f"Cannot read {path}: {exc.strerror or exc}", "file") from None
    with handle:
        job = await api.call("POST", "/imports/uploads", json={"name": path.name, "size": size})
        while job["received"] < size:
            handle.seek(job["received"])
            piece = handle.read(PIECE_BYTES)
            try:
                job = await api.call(
                    "POST", f"/imports/{job['id']}/pieces", params={"offset": job["received"]},
                    content=piece, headers={"Content-Type": "application/octet-stream"},
                    timeout=httpx.Timeout(60, write=300),
                )  # fmt: skip
            except ApiError as exc:
                if exc.status != 409:
                    raise
                job = await api.call("GET", f"/imports/{job['id']}")  # resume where it stops
            print(f"\rSending… {100 * job['received'] // size}%", end="", file=sys.stderr)
        print(file=sys.stderr)
    return job


def preview_lines(preview: dict) -> list[str]:
    formats = ", ".join(f"{f['label']} ({f['conversations']:,})" for f in preview["formats"])
    lines = [
        f"{formats}: {preview['conversations']:,} conversations to import, "
        f"{preview['messages']:,} messages, {preview['branches']:,} branches, "
        f"{preview['attachments']:,} attachments."
    ]
    if preview["already"]:
        lines.append(f"{preview['already']:,} already imported (passed over).")
    if preview["voices"]:
        voices = ", ".join(f"{v['name']} ({v['messages']:,})" for v in preview["voices"])
        lines.append(f"Replies from: {voices}; each goes to a role (--role NAME=HANDLE, or new).")
    for skipped in preview["skipped"]:
        lines.append(f"Left out: {skipped['what']} ({skipped['count']:,})")
    for broken in preview["broken"]:
        lines.append(f"Cannot be read: conversation {broken['position']} “{broken['title']}”: "
                     f"{broken['reason']}")  # fmt: skip
    return lines


def say_progress(job: dict) -> None:
    print(f"\rImporting… {job['done']:,} of {job['total']:,}", end="", file=sys.stderr, flush=True)


def _ask(question: str) -> bool:
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False
