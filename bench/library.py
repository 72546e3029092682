"""The library on this machine: indexing throughput, retrieval quality and search latency.

1. **Documents.** Python's standard library documentation as pydoc renders it (30 modules,
   the same for a given Python), typeset into real PDFs with a text layer, 60 lines a page.
   They are read the way a person's upload is (a bounded child reads each PDF, chunks, the
   full-text index), first without vectors, then with the embedded model's: pages per second.
2. **Quality.** The questions in `bench/data/library_questions.tsv` (many in other words than
   their answer's), each judged by words its answer holds: recall@5 and MRR@10 for full text
   alone, vectors alone, and both fused (what the roles get), and for Open WebUI's default
   pipeline re-created here (its default splitter, 1,000 characters with 100 of overlap, and its
   default embedding model, all-MiniLM-L6-v2, vectors alone): open-webui itself is not run,
   as it brings torch, a vector database and its server to compute exactly this.
3. **Scale.** 1,000 documents of 50 passages each (50,000 passages of the corpus's words at
   their frequencies, with random unit vectors: embedding 50,000 passages takes most of an
   hour on two cores, and is measured in 1 as pages/s), then every question 3 times: p50/p95
   of the whole search (words, the question's vector, the exact vector search, fusion, the
   passages with their neighbours), against its parts side by side.

Run: `make bench-library`, or `python -m bench.library [--database-url URL] [--documents N]`.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import pydoc
import random
import statistics
import sys
import time
from pathlib import Path

from bench.long_threads import configure

MODULES = [
    "json",
    "csv",
    "sqlite3",
    "argparse",
    "logging",
    "pathlib",
    "datetime",
    "collections",
    "itertools",
    "functools",
    "re",
    "subprocess",
    "threading",
    "asyncio.tasks",
    "zipfile",
    "hashlib",
    "shutil",
    "tempfile",
    "unittest.mock",
    "http.client",
    "urllib.parse",
    "email.message",
    "heapq",
    "bisect",
    "textwrap",
    "string",
    "statistics",
    "decimal",
    "fractions",
    "random",
]
QUESTIONS = Path(__file__).parent / "data" / "library_questions.tsv"
LINES_PER_PAGE = 60


def module_text(name: str) -> str:
    return pydoc.render_doc(importlib.import_module(name), renderer=pydoc.plaintext)


def typeset(text: str) -> bytes:
    """A real PDF of `text` (Courier, LINES_PER_PAGE lines a page), built with pypdf."""
    import io

    from pypdf import PdfWriter
    from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject
    from pypdf.generic import NumberObject as Number

    lines = []
    for line in text.splitlines():
        line = line.encode("latin-1", "replace").decode("latin-1")
        lines.extend([line[i : i + 100] for i in range(0, len(line), 100)] or [""])
    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Courier"),
    }))  # fmt: skip
    for start in range(0, len(lines), LINES_PER_PAGE):
        shown = [
            "(" + line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") Tj T*"
            for line in lines[start : start + LINES_PER_PAGE]
        ]
        stream = DecodedStreamObject()
        stream.set_data(
            ("BT /F1 8 Tf 11 TL 30 760 Td " + " ".join(shown) + " ET").encode("latin-1")
        )
        page = writer.add_blank_page(width=612, height=792)
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        page[NameObject("/MediaBox")] = ArrayObject([Number(n) for n in (0, 0, 612, 792)])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def questions() -> list[tuple[str, str, str]]:
    """(question, words its answer holds, how it is asked)."""
    rows = [line for line in QUESTIONS.read_text().splitlines() if not line.startswith("#")]
    return [(row[0], row[1], row[2]) for row in csv.reader(rows[1:], delimiter="\t") if row]


def normal(text: str) -> str:
    return " ".join(text.split()).lower()


def judged(found: list[str], answer: str, *, depth: int = 10) -> tuple[bool, float]:
    """(answer in the first 5, reciprocal rank of the first passage holding it, within depth)."""
    wanted = normal(answer)
    for rank, text in enumerate(found[:depth], start=1):
        if wanted in normal(text):
            return rank <= 5, 1.0 / rank
    return False, 0.0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(share * len(ordered)) - 1)]


# --- Open WebUI's default pipeline, re-created ----------------------------------------------


def recursive_split(text: str, size: int = 1000, overlap: int = 100) -> list[str]:
    """LangChain's RecursiveCharacterTextSplitter as Open WebUI uses it by default
    (CHUNK_SIZE 1000, CHUNK_OVERLAP 100, separators paragraph, line, space, character)."""

    def merge(pieces: list[str], separator: str) -> list[str]:
        chunks, current, total = [], [], 0
        for piece in pieces:
            extra = len(separator) if current else 0
            if total + len(piece) + extra > size and current:
                chunks.append(separator.join(current).strip())
                while current and (total > overlap or total + len(piece) + len(separator) > size):
                    total -= len(current[0]) + (len(separator) if len(current) > 1 else 0)
                    current.pop(0)
            current.append(piece)
            total += len(piece) + (len(separator) if len(current) > 1 else 0)
        if current:
            chunks.append(separator.join(current).strip())
        return [chunk for chunk in chunks if chunk]

    def split(part: str, separators: list[str]) -> list[str]:
        separator = next((s for s in separators if s == "" or s in part), "")
        rest = separators[separators.index(separator) + 1 :] if separator else []
        pieces = part.split(separator) if separator else list(part)
        out, small = [], []
        for piece in pieces:
            if len(piece) < size:
                small.append(piece)
                continue
            if small:
                out.extend(merge(small, separator))
                small = []
            out.extend(split(piece, rest) if rest else [piece])
        if small:
            out.extend(merge(small, separator))
        return out

    return split(text, ["\n\n", "\n", " ", ""])


def open_webui_ranking(texts: dict[str, str]):
    import numpy as np

    from apps.library import minilm

    chunks = [chunk for text in texts.values() for chunk in recursive_split(text)]
    started = time.perf_counter()
    matrix = minilm.encode(chunks)
    seconds = time.perf_counter() - started

    def ranked(question: str) -> list[str]:
        scores = matrix @ minilm.encode([question])[0]
        return [chunks[i] for i in np.argsort(-scores)[:10]]

    return ranked, len(chunks), seconds


# --- the run -------------------------------------------------------------------------------


def index_all(session, user, documents: dict[str, bytes]) -> tuple[float, int, int]:
    from apps.library.services import document_create, document_index

    pages = chunks = 0
    started = time.perf_counter()
    for name, data in documents.items():
        document = document_index(
            document=document_create(session=session, by=user, name=name, data=data), data=data
        )
        assert document.state == "ready", (name, document.error)
        pages += document.pages or 0
        chunks += document.chunks_count
    return time.perf_counter() - started, pages, chunks


def quality(session, asked: list[tuple[str, str, str]], owui) -> None:
    from apps.library.search import library_search

    ways = {
        "full text alone": lambda q: [h.text for h in library_search(
            session=session, question=q, limit=10, vectors=False)],
        "vectors alone": lambda q: [h.text for h in library_search(
            session=session, question=q, limit=10, words=False)],
        "both, fused (what the roles get)": lambda q: [h.text for h in library_search(
            session=session, question=q, limit=10)],
        f"Open WebUI's default, re-created ({owui[1]:,} chunks of 1,000 characters, vectors)":
            owui[0],
    }  # fmt: skip
    kinds = sorted({kind for _, _, kind in asked}, reverse=True)
    counts = " · ".join(f"{kind}: {sum(k == kind for *_, k in asked)}" for kind in kinds)
    print(f"\nRetrieval: recall@5 / MRR@10 by how the question is asked ({counts}):\n")
    print("| retrieval | " + " | ".join(kinds) + " | all | search p50 |")
    print("|---|" + "---|" * (len(kinds) + 2))
    for label, run in ways.items():
        judged_by_kind: dict[str, list[tuple[bool, float]]] = {kind: [] for kind in kinds}
        times = []
        for question, answer, kind in asked:
            started = time.perf_counter()
            found = run(question)
            times.append((time.perf_counter() - started) * 1000)
            judged_by_kind[kind].append(judged(found, answer))
        every = [one for kind in kinds for one in judged_by_kind[kind]]
        cells = [_score(judged_by_kind[kind]) for kind in kinds] + [_score(every)]
        print(f"| {label} | " + " | ".join(cells) + f" | {statistics.median(times):.1f} ms |")


def _score(judgements: list[tuple[bool, float]]) -> str:
    recall = sum(top5 for top5, _ in judgements) / len(judgements)
    return f"{recall:.2f} / {statistics.mean(rank for _, rank in judgements):.3f}"


def scale(user, texts: dict[str, str], asked, *, documents: int, per_document: int) -> None:
    import numpy as np
    from django.db import connection

    from apps.chat.records.sessions import session_create
    from apps.library.models import Chunk, Document
    from apps.library.search import full_text_ranked, library_search
    from apps.library.vectors import LOCAL, MATRICES, nearest

    rng = random.Random(47)
    words = " ".join(texts.values()).split()
    session = session_create(owner=user, name="Scale")
    started = time.perf_counter()
    made = Document.objects.bulk_create(
        Document(session=session, added_by=user, name=f"doc-{n:04}.pdf", size=1, sha256=f"{n:064x}",
                 state="ready", pages=per_document // 2, chunks_count=per_document,
                 embedder=LOCAL, vectors_done=per_document)
        for n in range(documents)
    )  # fmt: skip
    noise = np.random.default_rng(47)
    batch = []
    for document in made:
        for seq in range(per_document):
            start = rng.randrange(len(words) - 200)
            vector = noise.standard_normal(384).astype(np.float32)
            vector /= np.linalg.norm(vector)
            text = " ".join(words[start : start + 150])
            batch.append(Chunk(document=document, seq=seq, text=text, page=seq // 2 + 1,
                               heading="", start=0, end=1, vector=vector.tobytes()))  # fmt: skip
            if len(batch) == 5000:
                Chunk.objects.bulk_create(batch)
                batch = []
    Chunk.objects.bulk_create(batch)
    if connection.vendor == "postgresql":  # as autovacuum does within a minute of the writes
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE library_chunk")
    built = time.perf_counter() - started
    total = documents * per_document
    print(f"\nScale: {documents:,} documents, {total:,} passages written with their index in "
          f"{built:.1f} s.")  # fmt: skip
    MATRICES.clear()
    started = time.perf_counter()
    library_search(session=session, question=asked[0][0])
    print(f"First search (the process builds its {total:,} by 384 matrix): "
          f"{(time.perf_counter() - started) * 1000:.0f} ms.\n")  # fmt: skip
    parts = {
        "full text alone (the database's engine)": lambda q: full_text_ranked(
            session_id=session.pk, question=q, limit=40),
        "vectors alone (the question embedded, exact search)": lambda q: nearest(
            session=session, question=q, limit=40),
        "the whole search, fused, passages read": lambda q: library_search(
            session=session, question=q),
    }  # fmt: skip
    print("| at 50,000 passages | p50 | p95 | max |")
    print("|---|---|---|---|")
    for label, run in parts.items():
        times = []
        for _ in range(3):
            for question, *_ in asked:
                started = time.perf_counter()
                run(question)
                times.append((time.perf_counter() - started) * 1000)
        print(f"| {label} | {statistics.median(times):.1f} ms | {percentile(times, 0.95):.1f} ms "
              f"| {max(times):.1f} ms |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="default: a scratch SQLite file")
    parser.add_argument("--documents", type=int, default=1000, help="for the scale part")
    parser.add_argument("--passages", type=int, default=50, help="per document, scale part")
    parser.add_argument("--scale-only", action="store_true", help="skip parts 1 and 2")
    args = parser.parse_args()
    configure(args.database_url)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import override_settings, setup_test_environment

    from apps.chat.records.sessions import session_create

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        user = get_user_model().objects.create_user("bench")
        texts = {f"{name}.pdf": module_text(name) for name in MODULES}
        asked = questions()
        if args.scale_only:
            scale(user, texts, asked, documents=args.documents, per_document=args.passages)
            return
        documents = {name: typeset(text) for name, text in texts.items()}
        size = sum(map(len, documents.values())) / 1e6
        print(f"\nLibrary on {connection.vendor}: {len(documents)} PDFs ({size:.1f} MB), "
              f"{len(asked)} questions.\n")  # fmt: skip
        with override_settings(PARLEY_LIBRARY_VECTORS="off"):
            seconds, pages, chunks = index_all(
                session_create(owner=user, name="Words"), user, documents
            )
        print("| indexing | pages | passages | time | pages/s |")
        print("|---|---|---|---|---|")
        print(f"| read, chunked, full-text indexed | {pages} | {chunks} | {seconds:.1f} s | "
              f"{pages / seconds:.0f} |")  # fmt: skip
        session = session_create(owner=user, name="Meaning")
        with override_settings(PARLEY_LIBRARY_VECTORS="local"):
            seconds, pages, chunks = index_all(session, user, documents)
        print(f"| … and embedded (all-MiniLM-L6-v2 in numpy, this process) | {pages} | {chunks} | "
              f"{seconds:.1f} s | {pages / seconds:.1f} |")  # fmt: skip
        from apps.library.extraction import extract

        extracted = {
            name: "\n\n".join(section.text for section in extract(name, data))
            for name, data in documents.items()
        }
        owui = open_webui_ranking(extracted)
        print(f"| Open WebUI's default splitter, embedded the same way | {pages} | {owui[1]} | "
              f"{owui[2]:.1f} s (embedding only) | {pages / owui[2]:.1f} |")  # fmt: skip
        quality(session, asked, owui)
        scale(user, texts, asked, documents=args.documents, per_document=args.passages)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
