"""PostgreSQL: a GIN index on the same text-search vector `apps.chat.search` queries, so a
search looks words up instead of reading every message of the session. SQLite has no such
index (its search is a plain scan), so there this migration does nothing."""

from django.db import migrations

INDEX = "chat_message_search_simple"
# Must stay the expression `search_session` builds (SearchVector over ContentText, "simple").
CREATE = (
    f"CREATE INDEX IF NOT EXISTS {INDEX} ON chat_message USING gin ("
    "to_tsvector('simple'::regconfig, COALESCE(jsonb_path_query_array(content, "
    "'$[*] ? (@.type == \"text\").text')::text, '')))"
)


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("chat", "0008_thread_seen")]

    operations = [migrations.RunPython(create_index, drop_index)]
