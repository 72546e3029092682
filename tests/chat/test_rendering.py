from html.parser import HTMLParser

import pytest

from apps.chat.display.markdown import ALLOWED_TAGS, render_markdown

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    '<a href="x" onclick="alert(1)">x</a>',
    "<iframe src=//evil></iframe>",
    "```html\n<script>alert(1)</script>\n```",
    "<svg><script>alert(1)</script></svg>",
    '<div style="background:url(javascript:alert(1))">x</div>',
]


class ElementCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


@pytest.mark.parametrize("source", HOSTILE)
def test_hostile_markup_never_becomes_an_element(source):
    collector = ElementCollector()
    collector.feed(render_markdown(source))
    for tag, attrs in collector.elements:
        # Parley's own Copy button around code blocks, added after sanitising, and nothing else.
        if tag == "button":
            assert attrs == {"type": "button", "class": "copy-code", "aria-label": "Copy code"}
            continue
        assert tag in ALLOWED_TAGS
        assert not any(name.startswith("on") or name == "style" for name in attrs)
        assert not attrs.get("href", "").lower().startswith("javascript")


def test_code_blocks_are_highlighted_with_a_copy_button():
    html = render_markdown("```python\ndef f():\n    return 1\n```")
    assert '<span class="k">def</span>' in html
    assert '<div class="code-block"><button type="button" class="copy-code"' in html
    # Typed as text, the same markup stays text.
    typed = render_markdown('<div class="code-block"><button>Copy</button><pre>x</pre></div>')
    assert "<button" not in typed and "&lt;button&gt;" in typed


def test_links_open_safely():
    html = render_markdown("[docs](https://example.org)")
    assert 'href="https://example.org"' in html
    assert "noopener" in html


def test_tables_and_emphasis_render():
    html = render_markdown("**bold** ~~gone~~\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert "<strong>bold</strong>" in html
    assert "<s>gone</s>" in html or "<del>gone</del>" in html
    assert "<table>" in html


def test_text_on_either_side_of_a_tool_call_stays_apart():
    from apps.chat.display.bubbles import shown_text
    from apps.chat.models import Message

    message = Message(
        speaker="assistant",
        content=[
            {"type": "text", "text": "That looks good."},
            {"type": "tool_call", "id": "1", "name": "read_memory", "arguments": {}},
            {"type": "tool_result", "tool_call_id": "1", "content": "x", "is_error": False},
            {"type": "text", "text": "Quirky detail: the bell."},
        ],
    )
    assert shown_text(message) == "That looks good.\n\nQuirky detail: the bell."
    assert message.text == "That looks good.Quirky detail: the bell."  # the stored transcript
