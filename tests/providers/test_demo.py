import asyncio

from apps.providers.adapters.demo import demo_reply_text, tokenize
from apps.providers.registry import get_adapter
from apps.providers.types import ChatMessage, ChatRequest, Stop, TextDelta, Usage


def _request(text: str) -> ChatRequest:
    return ChatRequest(
        model="demo-1",
        system=(),
        messages=(ChatMessage(role="user", parts=({"type": "text", "text": text},)),),
        metadata={"speaker_name": "Director", "last_user_text": text},
    )


def test_tokens_join_back_to_the_exact_text():
    text = demo_reply_text(_request("Hello\n\n  there `code`"))
    tokens = tokenize(text)
    assert "".join(tokens) == text
    assert len(tokens) > 50


def test_the_demo_says_it_is_a_demo_and_quotes_the_person():
    text = demo_reply_text(_request("Make the second act darker"))
    assert text.startswith("**Demo reply** from Director")
    assert "> Make the second act darker" in text
    assert "```python" in text


def test_the_demo_streams_deltas_then_usage_then_stop(settings):
    settings.PARLEY_DEMO_FIRST_TOKEN_MS = 0
    settings.PARLEY_DEMO_TOKENS_PER_SECOND = 10_000

    async def collect():
        return [event async for event in get_adapter("demo").stream(_request("hi"))]

    events = asyncio.run(collect())
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    assert "".join(deltas) == demo_reply_text(_request("hi"))
    assert isinstance(events[-2], Usage) and events[-2].output_tokens == len(deltas)
    assert events[-1] == Stop("end")
