from django.db import migrations

from apps.roles.defaults import ASSISTANT


def create_assistant(apps, schema_editor):
    Role = apps.get_model("roles", "Role")
    fields = {key: value for key, value in ASSISTANT.items() if key != "handle"}
    Role.objects.get_or_create(handle=ASSISTANT["handle"], defaults=fields)


class Migration(migrations.Migration):
    dependencies = [("roles", "0001_initial")]
    operations = [migrations.RunPython(create_assistant, migrations.RunPython.noop)]
