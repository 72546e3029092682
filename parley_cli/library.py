"""`parley library add FILE… --session NAME` and `parley library list --session NAME`: a
session's library from a terminal. Adding waits until every document is read (or says why
one could not be), one line each."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from parley_cli.client import Api

POLL_SECONDS = 0.5
READING = ("queued", "indexing")


def document_line(document: dict) -> str:
    if document["state"] == "ready":
        count = document.get("pages") or 0
        pages = f"{count} page{'s' if count != 1 else ''}, " if count else ""
        passages = document["passages"]
        return f"{document['name']}: {pages}{passages} passage{'s' if passages != 1 else ''}"
    if document["state"] == "failed":
        return f"{document['name']}: not added — {document['error']}"
    return f"{document['name']}: being read…"


async def add(
    api: Api, session_name: str, paths: list[Path], *, say: Callable[[str], None] = print,
    timeout: float = 600,
) -> int:  # fmt: skip
    session = await api.find_session(session_name)
    files = []
    for path in paths:
        try:
            files.append(("files", (path.name, path.read_bytes())))
        except OSError as exc:
            say(f"Cannot read {path}: {exc.strerror or exc}")
            return 2
    added = await api.call("POST", f"/sessions/{session['id']}/library", files=files)
    wanted = {document["id"] for document in added}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    documents = added
    while any(d["state"] in READING for d in documents) and loop.time() < deadline:
        await asyncio.sleep(POLL_SECONDS)
        listed = await api.call("GET", f"/sessions/{session['id']}/library")
        documents = [d for d in listed if d["id"] in wanted]
    for document in documents:
        say(document_line(document))
    return 0 if all(d["state"] == "ready" for d in documents) else 1


async def show(api: Api, session_name: str, *, say: Callable[[str], None] = print) -> int:
    session = await api.find_session(session_name)
    documents = await api.call("GET", f"/sessions/{session['id']}/library")
    for document in documents:
        say(document_line(document))
    if not documents:
        say(f"The library of {session['name']} is empty.")
    return 0
