"""The chunks' full-text index, in each database's own engine (Django has no FTS5 and no
generated tsvector column): on SQLite an FTS5 table over `library_chunk` (porter stemming,
unicode61), kept in step by triggers; on PostgreSQL a stored `search` tsvector ('english',
the heading weighted above the text) with a GIN index. `apps.library.search` queries them."""

from django.db import migrations

SQLITE = [
    "CREATE VIRTUAL TABLE library_chunk_fts USING fts5(text, heading, content='library_chunk', "
    "content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER library_chunk_fts_insert AFTER INSERT ON library_chunk BEGIN "
    "INSERT INTO library_chunk_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading); "
    "END",
    "CREATE TRIGGER library_chunk_fts_delete AFTER DELETE ON library_chunk BEGIN "
    "INSERT INTO library_chunk_fts(library_chunk_fts, rowid, text, heading) "
    "VALUES ('delete', old.id, old.text, old.heading); END",
    "CREATE TRIGGER library_chunk_fts_update AFTER UPDATE ON library_chunk BEGIN "
    "INSERT INTO library_chunk_fts(library_chunk_fts, rowid, text, heading) "
    "VALUES ('delete', old.id, old.text, old.heading); "
    "INSERT INTO library_chunk_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading); "
    "END",
]
SQLITE_UNDO = [
    "DROP TRIGGER IF EXISTS library_chunk_fts_update",
    "DROP TRIGGER IF EXISTS library_chunk_fts_delete",
    "DROP TRIGGER IF EXISTS library_chunk_fts_insert",
    "DROP TABLE IF EXISTS library_chunk_fts",
]
POSTGRESQL = [
    "ALTER TABLE library_chunk ADD COLUMN search tsvector GENERATED ALWAYS AS ("
    "setweight(to_tsvector('english', heading), 'A') || to_tsvector('english', text)) STORED",
    "CREATE INDEX library_chunk_search ON library_chunk USING gin (search)",
]
POSTGRESQL_UNDO = [
    "DROP INDEX IF EXISTS library_chunk_search",
    "ALTER TABLE library_chunk DROP COLUMN IF EXISTS search",
]


def create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in {"sqlite": SQLITE, "postgresql": POSTGRESQL}.get(vendor, []):
        schema_editor.execute(statement)


def drop(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in {"sqlite": SQLITE_UNDO, "postgresql": POSTGRESQL_UNDO}.get(vendor, []):
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("library", "0001_initial")]

    operations = [migrations.RunPython(create, drop)]
