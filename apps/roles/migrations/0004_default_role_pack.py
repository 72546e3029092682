"""Install the default role pack on first run, so a fresh install has the film crew."""

from django.conf import settings
from django.db import migrations

from apps.roles.role_packs import apply_pack, read_pack, shipped_packs


def load_default_pack(apps, schema_editor):
    path = shipped_packs().get(settings.PARLEY_DEFAULT_ROLE_PACK)
    if path is None:
        return
    data = read_pack(path.read_text(encoding="utf-8"), source=path.name)
    apply_pack(
        data, Role=apps.get_model("roles", "Role"), RoleGroup=apps.get_model("roles", "RoleGroup")
    )


class Migration(migrations.Migration):
    dependencies = [("roles", "0003_role_pack_and_groups")]
    operations = [migrations.RunPython(load_default_pack, migrations.RunPython.noop)]
