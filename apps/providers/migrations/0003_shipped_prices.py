"""List prices (US $ per million tokens) for the models Parley offers by default, as published
by the providers when this release was made. Edit them in Admin → Model prices; a row you
changed is never overwritten (this runs once)."""

from decimal import Decimal

from django.db import migrations

# provider, model, input, output, cache read, cache write. OpenAI and Gemini charge no premium
# for writing their (automatic or implicit) caches: a write costs what an input token does.
PRICES = [
    ("anthropic", "claude-opus-5", "5", "25", "0.50", "6.25"),
    ("anthropic", "claude-sonnet-5", "3", "15", "0.30", "3.75"),
    ("anthropic", "claude-haiku-4-5", "1", "5", "0.10", "1.25"),
    ("openai", "gpt-4.1", "2", "8", "0.50", "2"),
    ("openai", "gpt-4.1-mini", "0.40", "1.60", "0.10", "0.40"),
    ("openai", "gpt-4o", "2.50", "10", "1.25", "2.50"),
    ("openai", "gpt-4o-mini", "0.15", "0.60", "0.075", "0.15"),
    ("gemini", "gemini-2.5-pro", "1.25", "10", "0.125", "1.25"),
    ("gemini", "gemini-2.5-flash", "0.30", "2.50", "0.03", "0.30"),
    ("gemini", "gemini-2.5-flash-lite", "0.10", "0.40", "0.01", "0.10"),
    ("demo", "demo-1", "0", "0", "0", "0"),
]


def ship(apps, schema_editor):
    ModelPrice = apps.get_model("providers", "ModelPrice")
    for provider, model, prompt, output, read, write in PRICES:
        ModelPrice.objects.get_or_create(
            provider=provider,
            model=model,
            defaults={
                "input_per_mtok": Decimal(prompt),
                "output_per_mtok": Decimal(output),
                "cache_read_per_mtok": Decimal(read),
                "cache_write_per_mtok": Decimal(write),
            },
        )


class Migration(migrations.Migration):
    dependencies = [("providers", "0002_model_prices")]
    operations = [migrations.RunPython(ship, migrations.RunPython.noop)]
