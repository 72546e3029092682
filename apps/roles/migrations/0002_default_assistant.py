from django.db import migrations

ASSISTANT = {
    "display_name": "Assistant",
    "description": "A neutral stage manager: app help, routing, analysis.",
    "persona": (
        "You are the assistant of this group chat: neutral, operational and concise. You help "
        "the person, summarise where the discussion stands and suggest which role to ask when "
        "a question belongs to someone else's domain."
    ),
    "icon": "✨",
    "colour": "#64748b",
    "sort_order": 0,
    "is_default": True,
    "can_write": True,
}


def create_assistant(apps, schema_editor):
    apps.get_model("roles", "Role").objects.get_or_create(handle="assistant", defaults=ASSISTANT)


class Migration(migrations.Migration):
    dependencies = [("roles", "0001_initial")]
    operations = [migrations.RunPython(create_assistant, migrations.RunPython.noop)]
