"""Markdown to safe HTML: markdown-it for parsing, Pygments for code, nh3 for sanitising."""

from __future__ import annotations

from functools import lru_cache

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2",
    "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s", "span", "strong",
    "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "div": {"class"},
    "pre": {"class"},
    "span": {"class"},
    "td": {"align"},
    "th": {"align"},
    "ol": {"start"},
}
_FORMATTER = HtmlFormatter(nowrap=True)


def _highlight(code: str, language: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(language or "text", stripall=False)
    except ClassNotFound:
        return ""  # markdown-it escapes the block itself
    return highlight(code, lexer, _FORMATTER)


@lru_cache(maxsize=2)
def _parser(breaks: bool = False) -> MarkdownIt:
    # Raw HTML stays off: hostile markup in a message is shown as text, never interpreted.
    return MarkdownIt(
        "commonmark",
        {"html": False, "linkify": False, "highlight": _highlight, "breaks": breaks},
    ).enable(["table", "strikethrough"])


def render_markdown(text: str, *, breaks: bool = False) -> SafeString:
    """Render Markdown from a user or a model into HTML that is safe to insert into a page.
    With `breaks`, a single line break stays a line break (what a person typed)."""
    return mark_safe(_render(text, breaks))  # noqa: S308  (sanitised by nh3 in _render)


@lru_cache(maxsize=2048)
def _render(text: str, breaks: bool = False) -> str:
    # Settled messages never change, so a page view re-renders only what it has not seen.
    raw = _parser(breaks).render(text)
    clean = nh3.clean(
        raw,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    # Parley's own markup, added after sanitising (it would not pass): a Copy button per block.
    return clean.replace("<pre>", CODE_BLOCK_START).replace("</pre>", CODE_BLOCK_END)


CODE_BLOCK_START = (
    '<div class="code-block"><button type="button" class="copy-code" aria-label="Copy code">'
    "Copy</button><pre>"
)
CODE_BLOCK_END = "</pre></div>"
