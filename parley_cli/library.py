"""`parley library add FILE… --session NAME`, `parley library list --session NAME` and
`parley library search WORDS… --session NAME`: a session's library from a terminal. Adding
waits until every document is read (or says why one could not be), one line each; searching
prints the passages the roles would find, each with its mark to cite."""

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
        line = f"{document['name']}: {pages}{passages} passage{'s' if passages != 1 else ''}"
        if document.get("vectors") and document.get("vectors_done", passages) < passages:
            line += f" (finding meanings: {document['vectors_done']} of {passages})"
        return line
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


async def search(
    api: Api, session_name: str, question: str, *, say: Callable[[str], None] = print
) -> int:
    session = await api.find_session(session_name)
    found = await api.call(
        "GET", f"/sessions/{session['id']}/library/search", params={"q": question}
    )
    for passage in found:
        page = f", page {passage['page']}" if passage["page"] else ""
        heading = f" — {passage['heading']}" if passage["heading"] else ""
        say(f"[{passage['mark']}] {passage['document_name']}{page}{heading}")
        say("    " + " ".join(passage["text"].split())[:400])
    if not found:
        say(f"Nothing in the library of {session['name']} answers that.")
    return 0 if found else 1
