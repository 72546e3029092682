"""The registry from a provider kind to its streaming adapter.

The registry imports the adapters, never the other way round: an adapter knows only the
shared types, and a new provider is one module in `adapters/` plus one line here.
"""

from __future__ import annotations

from apps.providers.adapters.anthropic import AnthropicAdapter
from apps.providers.adapters.demo import DemoAdapter
from apps.providers.adapters.gemini import GeminiAdapter
from apps.providers.adapters.openai import (
    AzureOpenAIAdapter,
    OpenAIAdapter,
    OpenAICompatibleAdapter,
)
from apps.providers.types import ProviderAdapter

_ADAPTERS: dict[str, ProviderAdapter] = {
    adapter.kind: adapter
    for adapter in (
        AnthropicAdapter(),
        AzureOpenAIAdapter(),
        DemoAdapter(),
        GeminiAdapter(),
        OpenAIAdapter(),
        OpenAICompatibleAdapter(),
    )
}


def get_adapter(kind: str) -> ProviderAdapter:
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise LookupError(
            f"Unknown provider {kind!r}; known: {', '.join(sorted(_ADAPTERS))}."
        ) from None


def all_adapters() -> list[ProviderAdapter]:
    return list(_ADAPTERS.values())
