# The quota counts a PDF's first-page preview too: its size is kept on the attachment, and
# the previews made before are measured once here.

from django.core.files.storage import default_storage
from django.db import migrations, models


def measure_previews(apps, schema_editor):
    Attachment = apps.get_model("chat", "Attachment")
    for attachment in Attachment.objects.exclude(preview="").only("pk", "preview").iterator():
        try:
            size = default_storage.size(attachment.preview.name)
        except OSError:
            continue
        Attachment.objects.filter(pk=attachment.pk).update(preview_size=size)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0021_sharedlink"),
    ]

    operations = [
        migrations.AddField(
            model_name="attachment",
            name="preview_size",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(measure_previews, migrations.RunPython.noop),
    ]
