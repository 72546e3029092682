"""Back Parley up, and restore it into an empty database and storage.

    python -m config.backup create DIR    # DIR must not exist yet
    python -m config.backup restore DIR   # into the configured, empty, database and storage

A backup is a folder: the database (PostgreSQL's `pg_dump` custom format, or a consistent
copy of the SQLite file made with SQLite's online backup), every file of Django's storage
(attachments, PDFs' first pages, the library, avatars, uploads; copied through the storage
API in pieces, so object storage works the same and no file is read whole into memory), the
sessions' workspaces (the same way), and a manifest with each file's size and SHA-256, checked on
restore. The processes may keep running while it is made: the database copy is a snapshot,
and a file saved meanwhile is either in it or missing from the rows too (the retention
sweep's grace keeps young files).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

CHUNK = 1024 * 1024
MANIFEST = "manifest.json"


class BackupError(Exception):
    """Why a backup or a restore could not be done, in a sentence."""


def _database() -> dict:
    from django.db import connection

    return connection.settings_dict


def _is_sqlite(db: dict) -> bool:
    return "sqlite" in db["ENGINE"] or db["ENGINE"] == "config.sqlite"


def _pg_env(db: dict) -> dict[str, str]:
    env = {
        **os.environ,
        "PGHOST": db.get("HOST") or "127.0.0.1",
        "PGPORT": str(db.get("PORT") or 5432),
        "PGUSER": db.get("USER") or "",
        "PGDATABASE": db["NAME"],
    }
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]  # for the child only: never on its command line
    return env


def _copy_file(read, write) -> str:
    digest = hashlib.sha256()
    while chunk := read.read(CHUNK):
        digest.update(chunk)
        write.write(chunk)
    return digest.hexdigest()


# The backup's folders, and the storage each holds: Django's default one (attachments, PDFs'
# pages, the library, avatars) and the sessions' workspaces.
STORAGES = {"storage": "default", "workspaces": "workspace"}


def _storage(alias: str):
    from django.core.files.storage import storages

    return storages[alias]


def _storage_names(alias: str) -> list[str]:
    from apps.ops.storage import files_under

    return sorted(files_under("", _storage(alias)))


def create(folder: Path) -> dict:
    """Write a backup into `folder` (which must not exist); its manifest."""
    if folder.exists():
        raise BackupError(f"{folder} exists already: a backup goes into a new folder.")
    (folder / "storage").mkdir(parents=True)
    db = _database()
    if _is_sqlite(db):
        source, target = sqlite3.connect(db["NAME"]), sqlite3.connect(folder / "database.sqlite3")
        with target:
            source.backup(target)
        source.close()
        target.close()
        database = "database.sqlite3"
    else:
        database = "database.pgdump"
        subprocess.run(  # noqa: S603 (PostgreSQL's own tool on the path, our own arguments)
            ["pg_dump", "--format=custom", "--no-owner", "--file", str(folder / database)],  # noqa: S607
            env=_pg_env(db),
            check=True,
            capture_output=True,
        )
    files = {}
    for place, alias in STORAGES.items():
        storage = _storage(alias)
        for name in _storage_names(alias):
            path = folder / place / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with storage.open(name, "rb") as read, path.open("wb") as write:
                files[f"{place}/{name}"] = {
                    "sha256": _copy_file(read, write), "size": path.stat().st_size
                }  # fmt: skip
    manifest = {"version": 2, "database": database, "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def read_manifest(folder: Path) -> dict:
    """The backup's manifest, its files named by their place in the folder ("storage/…",
    "workspaces/…"); a version 1 backup (stop 55's: storage files by bare name, workspaces a
    plain folder tree beside them) is read as one of version 2."""
    manifest = json.loads((folder / MANIFEST).read_text())
    if manifest.get("version") == 1:
        manifest["files"] = {f"storage/{name}": kept for name, kept in manifest["files"].items()}
        tree = folder / "workspaces"
        for path in sorted(tree.rglob("*")) if tree.is_dir() else []:
            if path.is_file():
                with path.open("rb") as read:
                    digest = _copy_file(read, _Discard())
                relative = path.relative_to(folder).as_posix()
                manifest["files"][relative] = {"sha256": digest, "size": path.stat().st_size}
        manifest["version"] = 2
    return manifest


def restore(folder: Path) -> dict:
    """Restore the backup in `folder` into the configured database and storage, which must be
    empty (a restore never mixes two installations); its manifest."""
    from django.core.files import File
    from django.db import connection

    manifest = read_manifest(folder)
    for name, kept in manifest["files"].items():
        path = folder / name
        with path.open("rb") as read:
            if _copy_file(read, _Discard()) != kept["sha256"]:
                raise BackupError(f"{name} in the backup does not match its manifest: damaged?")
    if connection.introspection.table_names():
        raise BackupError("The database is not empty: restore into a new, empty database.")
    for place, alias in STORAGES.items():
        if _storage_names(alias):
            raise BackupError(f"The {place} are not empty: restore into new, empty storage.")
    db = _database()
    connection.close()
    if _is_sqlite(db):
        shutil.copyfile(folder / manifest["database"], db["NAME"])
    else:
        subprocess.run(  # noqa: S603 (as for pg_dump)
            [  # noqa: S607
                "pg_restore",
                "--no-owner",
                "--exit-on-error",
                "--dbname",
                db["NAME"],
                str(folder / manifest["database"]),
            ],
            env=_pg_env(db),
            check=True,
            capture_output=True,
        )
    for name in manifest["files"]:
        place, _, stored = name.partition("/")
        with (folder / name).open("rb") as read:
            _storage(STORAGES[place]).save(stored, File(read, name=stored))
    return manifest


class _Discard:
    def write(self, chunk: bytes) -> None:
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("create", "restore"):
        print(__doc__.split("\n\n")[1])
        return 2
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    try:
        manifest = (create if argv[0] == "create" else restore)(Path(argv[1]))
    except BackupError as exc:
        print(exc)
        return 1
    except subprocess.CalledProcessError as exc:
        print(f"{exc.cmd[0]} failed: {exc.stderr.decode(errors='replace').strip()}")
        return 1
    done = "Backed up" if argv[0] == "create" else "Restored"
    print(f"{done}: the database and {len(manifest['files'])} stored files ({argv[1]}).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
