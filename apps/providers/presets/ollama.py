"""Ollama: models on your own machine, over its OpenAI-compatible API; no key."""

from apps.providers.description import ProviderDescription, Reads

DESCRIPTION = ProviderDescription(
    kind="ollama",
    label="Ollama (on your machine)",
    wire="openai_compatible",
    error_label="Ollama",
    default_base_url="http://localhost:11434/v1",
    base_url_hint="Leave empty for http://localhost:11434/v1 (Ollama on this machine).",
    needs_key=False,
    default_model="llama3.1",
    embedding_model="nomic-embed-text",  # `ollama pull nomic-embed-text`
    model_names="name:tag, as `ollama list` shows them, e.g. llama3.1:8b",
    reads_by_model=tuple(
        (family, Reads(images=True))
        for family in ("llava", "llama3.2-vision", "gemma3", "qwen2.5vl", "minicpm-v")
    ),
)
