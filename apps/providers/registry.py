"""Every kind of provider Parley knows, from its description to the adapter that serves it.

The registry imports the adapters and the presets, never the other way round. A new wire
protocol is a module in `adapters/` (its adapter and description) plus a line in `WIRES` and
`DESCRIPTIONS`; a preset of an existing protocol is a module in `presets/` plus its line in
`DESCRIPTIONS` (and its test): see docs/architecture.md.
"""

from __future__ import annotations

from apps.providers.adapters import anthropic, demo, gemini, openai
from apps.providers.description import ProviderDescription
from apps.providers.presets import ollama, openrouter
from apps.providers.types import ProviderAdapter

WIRES: dict[str, type[ProviderAdapter]] = {
    "anthropic": anthropic.AnthropicAdapter,
    "azure_openai": openai.AzureOpenAIAdapter,
    "demo": demo.DemoAdapter,
    "gemini": gemini.GeminiAdapter,
    "openai": openai.OpenAIAdapter,
    "openai_compatible": openai.OpenAICompatibleAdapter,
}
DESCRIPTIONS: tuple[ProviderDescription, ...] = (
    anthropic.DESCRIPTION,
    openai.OPENAI,
    gemini.DESCRIPTION,
    openai.AZURE_OPENAI,
    openrouter.DESCRIPTION,
    ollama.DESCRIPTION,
    openai.OPENAI_COMPATIBLE,
    demo.DESCRIPTION,
)
_DESCRIBED = {description.kind: description for description in DESCRIPTIONS}
_ADAPTERS: dict[str, ProviderAdapter] = {
    description.kind: WIRES[description.wire](description)  # type: ignore[call-arg]
    for description in DESCRIPTIONS
}


def _unknown(kind: str) -> LookupError:
    return LookupError(f"Unknown provider {kind!r}; known: {', '.join(sorted(_DESCRIBED))}.")


def describe(kind: str) -> ProviderDescription:
    try:
        return _DESCRIBED[kind]
    except KeyError:
        raise _unknown(kind) from None


def get_adapter(kind: str) -> ProviderAdapter:
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise _unknown(kind) from None


def all_adapters() -> list[ProviderAdapter]:
    return list(_ADAPTERS.values())


def provider_choices() -> list[tuple[str, str]]:
    """The kinds for a choice field (a callable, so a new preset needs no migration)."""
    return [(description.kind, description.label) for description in DESCRIPTIONS]
