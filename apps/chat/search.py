"""Search a person's messages — one session's threads, or every session of theirs:
PostgreSQL full-text (prefix matches, any case) where the database is PostgreSQL, a plain
case-insensitive scan elsewhere. Results carry the session, the thread, the speaker and a
plain-text snippet (Markdown taken out) around the first match, the matched words marked. A
message is found by the name of a file attached to it too."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Func, Q, QuerySet, TextField
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from apps.chat.access import session_roles_by_handle, visible_to
from apps.chat.models import Attachment, Message, Session, speaker_name

MAX_RESULTS = 50
SNIPPET_CHARS = 160
TERM = re.compile(r"\w+", re.U)


class ContentText(Func):
    """PostgreSQL: the text parts of a message's content, without the JSON around them."""

    template = "jsonb_path_query_array(%(expressions)s, '$[*] ? (@.type == \"text\").text')::text"
    output_field = TextField()


@dataclass(frozen=True)
class SearchHit:
    message: Message
    snippet: SafeString
    speaker: str


def search_session(*, session: Session, user, query: str) -> list[SearchHit]:
    """The session's messages `user` may see matching every word of `query`, newest first
    (at most 50): other people's whispers are never found."""
    rows = Message.objects.filter(thread__session=session).filter(visible_to(user))
    return search_messages(rows, query=query)


def search_sessions(*, sessions: QuerySet[Session], user, query: str) -> list[SearchHit]:
    """The same search over every one of these sessions (the caller scopes them to the
    person), newest first; the page groups the hits by session."""
    rows = Message.objects.filter(thread__session__in=sessions).filter(visible_to(user))
    return search_messages(rows, query=query)


def search_messages(messages: QuerySet[Message], *, query: str) -> list[SearchHit]:
    terms = [term.casefold() for term in TERM.findall(query)][:8]
    if not terms:
        return []
    messages = (
        messages.filter(kind="chat")
        .select_related("thread__session", "author")
        .order_by("-created_at", "-pk")
    )
    # A message is found by its words, or by the name of a file attached to it.
    named = Attachment.objects.filter(message__in=messages)
    for term in terms:
        named = named.filter(name__icontains=term)
    by_name = named.values("message_id")
    if connection.vendor == "postgresql":
        found: list[Message] = list(
            full_text_matches(messages, terms, or_ids=by_name)[:MAX_RESULTS]
        )
    else:
        # As PostgreSQL's prefix matching does: each word starts a word of the message.
        patterns = [re.compile(rf"(?<!\w){re.escape(term)}", re.I | re.U) for term in terms]
        named_ids = set(by_name.values_list("message_id", flat=True))
        found = []
        for message in messages.iterator(chunk_size=500):
            text = message.text
            if message.pk in named_ids or all(pattern.search(text) for pattern in patterns):
                found.append(message)
                if len(found) == MAX_RESULTS:
                    break
    sessions = {message.thread.session_id: message.thread.session for message in found}
    roles = {
        (session_id, handle): role
        for session_id, session in sessions.items()
        for handle, role in session_roles_by_handle(
            session, {m.speaker for m in found if m.thread.session_id == session_id}
        ).items()
    }  # one query per session found (at most MAX_RESULTS)
    names = _names_matching([message.pk for message in found], terms)
    return [
        SearchHit(
            message,
            snippet(" ".join([*names.get(message.pk, []), message.text]), terms),
            speaker_name(message, roles.get((message.thread.session_id, message.speaker))),
        )
        for message in found
    ]


def _names_matching(message_ids: list[int], terms: list[str]) -> dict[int, list[str]]:
    """The names of the found messages' attachments that hold every term ("📎 chart.png"),
    to lead their snippets."""
    rows = Attachment.objects.filter(message_id__in=message_ids)
    for term in terms:
        rows = rows.filter(name__icontains=term)
    names: dict[int, list[str]] = {}
    for message_id, name in rows.values_list("message_id", "name"):
        names.setdefault(message_id, []).append(f"📎 {name}")
    return names


def full_text_matches(
    messages: QuerySet[Message], terms: list[str], *, or_ids=None
) -> QuerySet[Message]:
    """PostgreSQL: the messages with a word starting with each term (migration chat 0009
    indexes this very expression), or whose id is among `or_ids` (a subquery)."""
    raw = " & ".join(f"{term}:*" for term in terms)  # words only: nothing else to escape
    document = SearchVector(ContentText("content"), config="simple")
    matches = Q(document=SearchQuery(raw, search_type="raw", config="simple"))
    if or_ids is not None:
        matches |= Q(pk__in=or_ids)
    return messages.annotate(document=document).filter(matches)


# Markdown's marks, taken out of snippets: fences (with their language), headings, quotes,
# list bullets, emphasis, inline code, links and images (their text stays).
FENCE = re.compile(r"^\s*(?:```|~~~)[^\n]*$", re.M)
LINE_MARK = re.compile(r"^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)", re.M)
LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
EMPHASIS = re.compile(r"(?<![\w*_])(\*{1,3}|_{1,3}|~~)(?=\S)(.+?)(?<=\S)\1(?![\w*_])", re.S)
INLINE_CODE = re.compile(r"`+([^`\n]*)`+")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}.*$", re.M)


def plain_text(markdown: str) -> str:
    """What a reader sees of Markdown, as plain text (for snippets)."""
    text = FENCE.sub(" ", markdown)
    text = TABLE_RULE.sub(" ", text)
    text = LINE_MARK.sub("", text)
    text = LINK.sub(r"\1", text)
    text = INLINE_CODE.sub(r"\1", text)
    for _ in range(2):  # nested emphasis (**bold _and italic_**)
        text = EMPHASIS.sub(r"\2", text)
    return text.replace("|", " ")


def snippet(text: str, terms: list[str]) -> SafeString:
    """About 160 characters of plain text around the first match, the matched words marked."""
    text = plain_text(text)
    folded = text.casefold()
    positions = [folded.find(term) for term in terms if folded.find(term) >= 0]
    first = min(positions) if positions else 0
    start = max(0, first - SNIPPET_CHARS // 3)
    piece = " ".join(text[start : start + SNIPPET_CHARS].split())
    longest_first = sorted(set(terms), key=len, reverse=True)
    # A word found by its start is marked whole ("harb" marks "HARBOUR").
    alternatives = "|".join(re.escape(term) for term in longest_first)
    pattern = re.compile(f"(?:{alternatives})\\w*", re.I | re.U)
    parts, last = [], 0
    for match in pattern.finditer(piece):
        parts += [escape(piece[last : match.start()]), f"<mark>{escape(match.group())}</mark>"]
        last = match.end()
    marked = "".join([*parts, escape(piece[last:])])
    prefix = "…" if start else ""
    suffix = "…" if start + SNIPPET_CHARS < len(text) else ""
    return mark_safe(f"{prefix}{marked}{suffix}")  # noqa: S308  (escaped above)
