"""A transcript with tool calls survives anthropic → openai → gemini → anthropic unchanged."""

from apps.providers.adapters.translate import (
    from_anthropic,
    from_gemini_contents,
    from_openai,
    to_anthropic,
    to_gemini_contents,
    to_openai,
)
from apps.providers.types import ChatMessage, ChatRequest, SystemBlock

TRANSCRIPT = (
    ChatMessage(
        "user", ({"type": "text", "text": "[alice]: What's the weather in Oslo and Rome?"},)
    ),
    ChatMessage(
        "assistant",
        (
            {"type": "text", "text": "Let me look both up."},
            {
                "type": "tool_call",
                "id": "call_1",
                "name": "get_weather",
                "arguments": {"city": "Oslo"},
            },
            {
                "type": "tool_call",
                "id": "call_2",
                "name": "get_weather",
                "arguments": {"city": "Rome"},
            },
        ),
    ),
    ChatMessage(
        "user",
        (
            {
                "type": "tool_result",
                "tool_call_id": "call_1",
                "name": "get_weather",
                "content": "Snow, -3 °C",
                "is_error": False,
            },
            {
                "type": "tool_result",
                "tool_call_id": "call_2",
                "name": "get_weather",
                "content": "Sunny, 21 °C",
                "is_error": False,
            },
        ),
    ),
    ChatMessage("assistant", ({"type": "text", "text": "Oslo: snow. Rome: sun."},)),
    ChatMessage("user", ({"type": "text", "text": "[alice]: Thanks!"},)),
)


def as_request(messages) -> ChatRequest:
    return ChatRequest(model="m", system=(SystemBlock("Rules."),), messages=tuple(messages))


def test_a_transcript_with_tool_calls_survives_every_provider_and_back():
    anthropic_side = from_anthropic(to_anthropic(as_request(TRANSCRIPT))["messages"])
    system, openai_side = from_openai(to_openai(as_request(anthropic_side))["messages"])
    gemini_side = from_gemini_contents(to_gemini_contents(openai_side))
    back = from_anthropic(to_anthropic(as_request(gemini_side))["messages"])
    assert system == "Rules."
    assert back == list(TRANSCRIPT)


def test_cache_breakpoints_are_placed_where_the_request_builder_asks():
    request = ChatRequest(
        model="m",
        system=(SystemBlock("Shared rules.", cache=True),),
        messages=(
            ChatMessage("user", ({"type": "text", "text": "[alice]: hi"},), cache=True),
            ChatMessage("user", ({"type": "text", "text": "You are @director."},)),
        ),
    )
    wire = to_anthropic(request)
    assert wire["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert wire["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in wire["messages"][1]["content"][-1]
