"""The registry from a provider kind to its streaming adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from apps.providers.types import ChatRequest, StreamEvent


class ProviderAdapter(Protocol):
    kind: str
    label: str
    default_model: str

    def stream(
        self, request: ChatRequest, *, api_key: str = "", base_url: str = ""
    ) -> AsyncIterator[StreamEvent]:
        """Yield the reply's events; raise ProviderError when the call fails."""
        ...

    async def list_models(self, *, api_key: str = "", base_url: str = "") -> list[str]:
        """The provider's model ids; raise ProviderError when the call fails."""
        ...


_ADAPTERS: dict[str, ProviderAdapter] = {}


def register(adapter: ProviderAdapter) -> ProviderAdapter:
    _ADAPTERS[adapter.kind] = adapter
    return adapter


def get_adapter(kind: str) -> ProviderAdapter:
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise LookupError(
            f"Unknown provider {kind!r}; known: {', '.join(sorted(_ADAPTERS))}."
        ) from None


def all_adapters() -> list[ProviderAdapter]:
    return list(_ADAPTERS.values())


def _load_builtin_adapters() -> None:
    # Each module registers its adapter on import.
    from apps.providers import (  # noqa: F401
        anthropic_adapter,
        demo,
        gemini_adapter,
        openai_adapter,
    )


_load_builtin_adapters()
