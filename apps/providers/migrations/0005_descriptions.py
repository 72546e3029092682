import apps.providers.registry
from django.db import migrations, models


def azure_into_options(apps, schema_editor):
    """An Azure credential's deployment and API version become its provider settings."""
    Credential = apps.get_model("providers", "Credential")
    for credential in Credential.objects.filter(provider="azure_openai"):
        credential.options = {
            key: value
            for key, value in (
                ("azure_deployment", credential.azure_deployment),
                ("azure_api_version", credential.azure_api_version),
            )
            if value
        }
        credential.save(update_fields=["options"])


def azure_out_of_options(apps, schema_editor):
    Credential = apps.get_model("providers", "Credential")
    for credential in Credential.objects.filter(provider="azure_openai"):
        credential.azure_deployment = credential.options.get("azure_deployment", "")
        credential.azure_api_version = credential.options.get("azure_api_version", "")
        credential.save(update_fields=["azure_deployment", "azure_api_version"])


class Migration(migrations.Migration):
    dependencies = [
        ("providers", "0004_credential_auth"),
    ]

    operations = [
        migrations.AddField(
            model_name="credential",
            name="options",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(azure_into_options, azure_out_of_options),
        migrations.RemoveField(
            model_name="credential",
            name="azure_api_version",
        ),
        migrations.RemoveField(
            model_name="credential",
            name="azure_deployment",
        ),
        migrations.AlterField(
            model_name="credential",
            name="provider",
            field=models.CharField(choices=apps.providers.registry.provider_choices, max_length=32),
        ),
        migrations.AlterField(
            model_name="modelprice",
            name="provider",
            field=models.CharField(choices=apps.providers.registry.provider_choices, max_length=32),
        ),
        migrations.CreateModel(
            name="ModelReads",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "provider",
                    models.CharField(
                        choices=apps.providers.registry.provider_choices, max_length=32
                    ),
                ),
                ("model", models.CharField(max_length=120)),
                ("images", models.BooleanField(default=False)),
                ("pdfs", models.BooleanField(default=False, verbose_name="PDFs")),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "what a model reads",
                "verbose_name_plural": "what models read",
                "ordering": ["provider", "model"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("provider", "model"), name="one_reads_per_model"
                    )
                ],
            },
        ),
    ]
