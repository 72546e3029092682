"""Give the shipped roles of an existing install their pack's output rules (where none set)."""

from django.db import migrations

from apps.roles.role_packs import read_pack, shipped_packs


def fill_output_rules(apps, schema_editor):
    Role = apps.get_model("roles", "Role")
    for path in shipped_packs().values():
        data = read_pack(path.read_text(encoding="utf-8"), source=path.name)
        for spec in data["roles"]:
            if spec.get("output_rules"):
                Role.objects.filter(handle=spec["handle"], output_rules="").update(
                    output_rules=spec["output_rules"]
                )


class Migration(migrations.Migration):
    dependencies = [("roles", "0005_council_conversation")]
    operations = [migrations.RunPython(fill_output_rules, migrations.RunPython.noop)]
