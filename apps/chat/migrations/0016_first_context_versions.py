"""Every session's persona and memory as they were become version 1, and every existing thread
pins it: from now on a change is a new version that older threads take only when asked."""

from django.db import migrations


def first_versions(apps, schema_editor):
    Session = apps.get_model("chat", "Session")
    Thread = apps.get_model("chat", "Thread")
    ContextVersion = apps.get_model("chat", "ContextVersion")
    for session in Session.objects.all().iterator():
        pins = {}
        for kind in ("persona", "memory"):
            pins[f"{kind}_version"] = ContextVersion.objects.create(
                session=session, kind=kind, number=1, text=getattr(session, kind),
                author_id=session.owner_id, note="as it was before versions",
            )  # fmt: skip
        Thread.objects.filter(session=session).update(**pins)


class Migration(migrations.Migration):
    dependencies = [("chat", "0015_context_versions")]
    operations = [migrations.RunPython(first_versions, migrations.RunPython.noop)]
