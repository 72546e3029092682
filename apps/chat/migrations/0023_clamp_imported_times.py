# Imports before issue 45 stored any time a file held: one outside Python's range (year 1 at
# +14:00, year 9999 at -14:00) made every page that read it fail, for good. Such times are
# brought inside the range Parley now takes (1990 to the day after tomorrow); the rows are
# matched and written without reading the values, which could not be read.

from datetime import UTC, datetime, timedelta

from django.db import migrations

EARLIEST = datetime(1990, 1, 1, tzinfo=UTC)
FIELDS = {
    "Message": ("created_at", "finished_at", "started_at", "updated_at"),
    "Session": ("created_at", "updated_at"),
    "Thread": ("created_at", "updated_at"),
}


def clamp(apps, schema_editor):
    latest = datetime.now(UTC) + timedelta(days=2)
    for model_name, fields in FIELDS.items():
        model = apps.get_model("chat", model_name)
        names = {field.name for field in model._meta.get_fields()}
        for field in fields:
            if field not in names:
                continue
            model.objects.filter(**{f"{field}__lt": EARLIEST}).update(**{field: EARLIEST})
            model.objects.filter(**{f"{field}__gt": latest}).update(**{field: latest})


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0022_attachment_preview_size"),
    ]

    operations = [migrations.RunPython(clamp, migrations.RunPython.noop)]
