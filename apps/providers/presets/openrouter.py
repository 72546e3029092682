"""OpenRouter: one key for many vendors' models, over OpenAI's chat completions."""

from apps.providers.description import ProviderDescription, Reads, Setting

DESCRIPTION = ProviderDescription(
    kind="openrouter",
    label="OpenRouter",
    wire="openai_compatible",
    default_base_url="https://openrouter.ai/api/v1",
    base_url_hint="Leave empty for https://openrouter.ai/api/v1.",
    settings=(
        Setting(
            "http_referer",
            "Your app's URL",
            help="Optional: sent as HTTP-Referer, so OpenRouter can attribute your usage.",
            header="HTTP-Referer",
            max_length=300,
            pattern=r"https?://\S+",
            pattern_message="Give a URL, e.g. https://example.org.",
        ),
        Setting(
            "x_title",
            "Your app's name",
            help="Optional: sent as X-Title.",
            header="X-Title",
            max_length=100,
        ),
    ),
    default_model="openai/gpt-4.1",
    fallback_models=("openai/gpt-4.1", "anthropic/claude-sonnet-4", "google/gemini-2.5-flash"),
    cheap_model="openai/gpt-4.1-mini",
    model_names="vendor/model, e.g. anthropic/claude-sonnet-4",
    reads_by_model=(
        ("anthropic/", Reads(images=True, pdfs=True)),
        ("google/gemini", Reads(images=True, pdfs=True)),
        ("openai/gpt-4", Reads(images=True, pdfs=True)),
    ),
    max_tokens_by_model=(("anthropic/", 16000), ("openai/gpt-4.1", 16000)),
)
