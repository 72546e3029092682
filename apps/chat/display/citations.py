"""Citations of the session's library in a reply: each mark `[L12]` (as `library_search`
hands them out) becomes a numbered link that opens the passage, and a quotation right before
a mark is checked against the passage it cites — verified (small differences in spacing,
quote marks, dashes and hyphenation at a line's end tolerated, and said), or "not found in
the cited passage". A mark of a passage that is not in this session's library is left as
it was written."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher
from urllib.parse import urlencode

from django.urls import reverse

from apps.library.models import Chunk
from apps.library.passages import passage_text, passages_of

MARK = re.compile(r"\[L(\d{1,12})\](?!\()")
# A quotation, then (after at most a few characters: a comma, "see", a parenthesis) its mark.
QUOTED = re.compile(r"[\"“«]([^\"“”«»\n]{6,800})[\"”»][^\[\n]{0,12}\[L(\d{1,12})\]")
# How much of a quotation must be found, in order, in the passage to count as verified.
CLOSE_ENOUGH = 0.92
# Typographic quotes and dashes, as the plain ones (a model and a PDF rarely agree on them).
TYPOGRAPHY = str.maketrans(
    "\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2013\u2014\u2010\u2011",
    "''''" + '""""' + "----",
)


@dataclass(frozen=True)
class Check:
    quote: str
    verified: bool
    exact: bool


def cited_markdown(text: str, *, session_id: int) -> tuple[str, list[Check]]:
    """The reply's Markdown with its marks as numbered links and each checked quotation
    marked; and the checks (for the convergence role and exports)."""
    ids = {int(found) for found in MARK.findall(text)}
    if not ids:
        return text, []
    chunks = {
        chunk.pk: chunk
        for chunk in Chunk.objects.filter(pk__in=ids, document__session_id=session_id)
        .select_related("document__session").defer("vector")
    }  # fmt: skip
    # A quotation is checked against the passage as the role read it (with its neighbours).
    passages = passages_of(list(chunks.values()))
    numbers: dict[int, int] = {}
    checks: list[Check] = []
    verdicts: dict[int, list[str]] = {}  # the position of a mark -> what its check says
    quoted: dict[int, str] = {}  # the position of a mark -> the words quoted before it
    for match in QUOTED.finditer(text):
        chunk = chunks.get(int(match[2]))
        if chunk is None:
            continue
        check = quote_check(match[1], passage_text(passages[chunk.pk]))
        checks.append(check)
        mark_at = match.end() - len(match[2]) - 3
        said = (
            " ✓" if check.verified and check.exact
            else " ✓ *(close: small differences from the passage)*" if check.verified
            else " ⚠ *not found in the cited passage*"
        )  # fmt: skip
        verdicts.setdefault(mark_at, []).append(said)
        quoted[mark_at] = match[1]

    def link(match: re.Match) -> str:
        chunk = chunks.get(int(match[1]))
        if chunk is None:
            return match[0]
        number = numbers.setdefault(chunk.pk, len(numbers) + 1)
        url = passage_url(chunk)
        if match.start() in quoted:  # the passage opens with the quoted words marked
            url += "?" + urlencode({"quote": quoted[match.start()][:300]})
        page = f", page {chunk.page}" if chunk.page else ""
        title = f"{chunk.document.name}{page}".replace('"', "'")
        return f'[\\[{number}\\]]({url} "{title}")' + "".join(verdicts.get(match.start(), []))

    return MARK.sub(link, text), checks


@dataclass(frozen=True)
class Citation:
    number: int  # as the reply's links are numbered: by first appearance
    chunk: Chunk
    checks: tuple[Check, ...]  # the quotations made with this mark


def citations_of(text: str, *, session_id: int) -> list[Citation]:
    """The passages a reply cites, numbered as its links are, each with its quotations
    checked (for the API and the terminal, which show them as footnotes)."""
    ids = [int(found) for found in MARK.findall(text)]
    if not ids:
        return []
    chunks = Chunk.objects.filter(pk__in=set(ids), document__session_id=session_id)
    found = {
        chunk.pk: chunk for chunk in chunks.select_related("document__session").defer("vector")
    }
    passages = passages_of(list(found.values()))
    checks: dict[int, list[Check]] = {}
    for match in QUOTED.finditer(text):
        pk = int(match[2])
        if pk in found:
            checks.setdefault(pk, []).append(quote_check(match[1], passage_text(passages[pk])))
    order = [pk for pk in dict.fromkeys(ids) if pk in found]
    return [
        Citation(number, found[pk], tuple(checks.get(pk, ())))
        for number, pk in enumerate(order, start=1)
    ]


def passage_url(chunk: Chunk) -> str:
    """Where a passage opens (its document and session loaded with it)."""
    return reverse(
        "chat:library_passage",
        kwargs={"session": chunk.document.session.public_id,
                "document": chunk.document.public_id, "seq": chunk.seq},
    )  # fmt: skip


def quote_check(quote: str, passage: str) -> Check:
    """Whether `quote` is in `passage`: exactly once both are normalised, or with at least
    CLOSE_ENOUGH of its characters found there in order (a typo, a dropped word)."""
    wanted, source = _normal(quote), _normal(passage)
    if not wanted:
        return Check(quote, False, False)
    if wanted in source:
        return Check(quote, True, True)
    matcher = SequenceMatcher(None, source, wanted, autojunk=False)
    found = sum(block.size for block in matcher.get_matching_blocks())
    return Check(quote, found / len(wanted) >= CLOSE_ENOUGH, False)


def _normal(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", text)  # a word hyphenated at a line's end
    text = text.translate(TYPOGRAPHY)
    text = re.sub(r"[\"'`]", "", text)
    text = re.sub(r"\s+", " ", text)
    return text.strip(" .,;:…").casefold()
